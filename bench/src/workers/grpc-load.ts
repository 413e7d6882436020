import * as grpc from '@grpc/grpc-js';
import { performance } from 'node:perf_hooks';
import { clientConstructor, internalMetadata, VERIFIER_PROTO, VERIFIER_SERVICE, type VerifyStreamResponse } from '@service-relay/grpc';
import { createVerifierClient } from '@service-relay/verifier-client';
import { echoService } from '../lib/echo-proto';
import { signTokens, type TenantKey } from '../lib/tokens';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The gRPC load generator, two patterns:
 * - `stream`: one long-lived bidi stream, one check per message, tagged with
 *   an id, a fixed number in flight (VerifyStreamRequest/Response; the
 *   verifier's VerifyStream or the echo server's EchoStream).
 * - `client`: the real @service-relay/verifier-client (VerifyBatchStream: the
 *   checks issued on one turn of the event loop go in one message), the same
 *   number of checks in flight, each a new verify() as soon as one settles;
 *   against the verifier or against the echo server's no-check
 *   TokenVerifier.
 */

interface RunArgs {
  target: 'verifier' | 'echo';
  pattern: 'stream' | 'client';
  address: string;
  key: TenantKey;
  /** The verifier's token RPCs require INTERNAL_TOKEN; the echo server gets the same metadata. */
  internalToken: string;
  inFlight: number;
  warmupMs: number;
  ms: number;
}

let tokens: string[] = [];

type RunResult = { rate: number; invalid: number; firstReason?: string };

async function run(args: RunArgs): Promise<RunResult> {
  if (tokens.length === 0) tokens = signTokens(args.key, 1024);
  return args.pattern === 'client' ? runClient(args) : runStream(args);
}

async function runClient(args: RunArgs): Promise<RunResult> {
  const client = createVerifierClient({ address: args.address, internalToken: args.internalToken, deadlineMs: 5000, maxInFlight: args.inFlight * 2 });
  let received = 0;
  let invalid = 0;
  let firstReason: string | undefined;
  let running = true;
  // Each lane keeps one check in flight; a lane's next check starts when its last settles.
  const lane = async (start: number) => {
    for (let i = start; running; i++) {
      const r = await client.verify(tokens[i % tokens.length]!).catch((e: { code?: string }) => ({ valid: false as const, reason: e.code ?? 'error' }));
      received += 1;
      if (!r.valid) {
        invalid += 1;
        firstReason ??= r.reason;
      }
    }
  };
  if (!(await client.ready())) {
    client.close();
    throw new Error(`no verifier at ${args.address}`);
  }
  const lanes = Array.from({ length: args.inFlight }, (_, k) => lane(k * 16));
  await new Promise((r) => setTimeout(r, args.warmupMs));
  const r0 = received;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, args.ms));
  const rate = ((received - r0) / (performance.now() - t0)) * 1000;
  running = false;
  // Every lane ends with its check in flight answered (or failed at its deadline).
  await Promise.race([Promise.all(lanes), new Promise((r) => setTimeout(r, 6000))]);
  client.close();
  return firstReason === undefined ? { rate, invalid } : { rate, invalid, firstReason };
}

async function runStream(args: RunArgs): Promise<RunResult> {
  const Ctor = args.target === 'verifier' ? clientConstructor(VERIFIER_PROTO, VERIFIER_SERVICE) : echoService();
  const method = args.target === 'verifier' ? 'VerifyStream' : 'EchoStream';
  const client = new Ctor(args.address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (md: grpc.Metadata) => grpc.ClientDuplexStream<unknown, VerifyStreamResponse>>;
  await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 5000, (err) => (err ? reject(err) : resolve())));
  const stream = client[method]!(internalMetadata(args.internalToken));
  let sent = 0;
  let received = 0;
  let invalid = 0;
  let firstReason: string | undefined;
  let running = true;
  const send = () => {
    stream.write({ id: ++sent, token: tokens[sent % tokens.length] });
  };
  const done = new Promise<void>((resolve, reject) => {
    stream.on('error', (err) => (running ? reject(err) : resolve()));
    stream.on('end', () => resolve());
  });
  done.catch(() => {});
  stream.on('data', (msg: VerifyStreamResponse) => {
    received += 1;
    if (msg.unavailable || !msg.result?.valid) {
      invalid += 1;
      firstReason ??= msg.unavailable ? 'unavailable' : (msg.result?.reason ?? 'no result');
    }
    if (running) send();
  });
  for (let i = 0; i < args.inFlight; i++) send();
  await new Promise((r) => setTimeout(r, args.warmupMs));
  const r0 = received;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, args.ms));
  const rate = ((received - r0) / (performance.now() - t0)) * 1000;
  running = false;
  // Drain what is in flight, then close the stream and the channel.
  const deadline = Date.now() + 3000;
  while (received < sent && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  stream.end();
  await Promise.race([done, new Promise((r) => setTimeout(r, 1000))]);
  client.close();
  return firstReason === undefined ? { rate, invalid } : { rate, invalid, firstReason };
}

serveWorker({ run });
