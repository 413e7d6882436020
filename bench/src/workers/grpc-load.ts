import * as grpc from '@grpc/grpc-js';
import { performance } from 'node:perf_hooks';
import { clientConstructor, internalMetadata, VERIFIER_PROTO, VERIFIER_SERVICE, type VerifyStreamResponse } from '@service-relay/grpc';
import { echoService } from '../lib/echo-proto';
import { signTokens, type TenantKey } from '../lib/tokens';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The gRPC load generator. Both targets get the same client pattern — the one
 * @service-relay/verifier-client uses: one long-lived bidi stream, requests
 * tagged with an id, a fixed number in flight — and the same messages
 * (VerifyStreamRequest/Response); only the server side differs.
 */

interface RunArgs {
  target: 'verifier' | 'echo';
  address: string;
  key: TenantKey;
  /** The verifier's token RPCs require INTERNAL_TOKEN; the echo server gets the same metadata. */
  internalToken: string;
  inFlight: number;
  warmupMs: number;
  ms: number;
}

let tokens: string[] = [];

async function run(args: RunArgs): Promise<{ rate: number; invalid: number; firstReason?: string }> {
  if (tokens.length === 0) tokens = signTokens(args.key, 1024);
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
