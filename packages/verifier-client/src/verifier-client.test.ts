import * as grpc from '@grpc/grpc-js';
import { createLogger, RelayError } from '@service-relay/core';
import { bindServer, MAX_VERIFY_BATCH, serviceDefinition, stopServer, VERIFIER_PROTO, VERIFIER_SERVICE } from '@service-relay/grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { createVerifierClient, type VerifierClient, type VerifierClientOptions } from './verifier-client';
import { toWire } from './verify-result';

// drop: end the stream without answering (a verifier stopping), then answer
// on the next stream; drop-always: end every stream without answering.
type Mode = 'answer' | 'silent' | 'unavailable' | 'drop' | 'drop-always';

interface FakeOptions {
  port?: number;
  /**
   * false: a verifier that predates VerifyBatchStream (grpc-js answers it
   * UNIMPLEMENTED); a box: the same while `current` is false (a verifier
   * upgraded in place).
   */
  batch?: boolean | { current: boolean };
  /** With batch: answer each batch's checks in reverse order, one response per check. */
  scatter?: boolean;
}

const verdict = (token: string) =>
  token === 'good'
    ? toWire({ valid: true, identity: { tenantId: 't', userId: 'u', expiresAt: 42, keySlot: 'previous', keyVersion: 3 } })
    : toWire({ valid: false, reason: 'bad_signature' });

/** A real gRPC server speaking the verifier proto, with scripted behaviour; it records the batch sizes and stream kinds it saw. */
async function fakeVerifier(mode: { current: Mode }, opts: FakeOptions = {}) {
  const seen = { batches: [] as number[], batchStreams: 0, singleStreams: 0, singles: 0 };
  /** The scripted answer to one check, or 'end' (drop the stream) or undefined (say nothing). */
  const respond = (req: { id: number; token: string }): Record<string, unknown> | 'end' | undefined => {
    if (mode.current === 'silent') return undefined;
    if (mode.current === 'drop' || mode.current === 'drop-always') {
      if (mode.current === 'drop') mode.current = 'answer';
      return 'end';
    }
    if (mode.current === 'unavailable' || req.token === 'unavailable') return { id: req.id, unavailable: true };
    return { id: req.id, result: verdict(req.token) };
  };
  const impl: grpc.UntypedServiceImplementation = {
    Verify: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.UNIMPLEMENTED }),
    VerifyStream: (call: grpc.ServerDuplexStream<{ id: number; token: string }, unknown>) => {
      seen.singleStreams++;
      call.on('data', (req: { id: number; token: string }) => {
        seen.singles++;
        const r = respond(req);
        if (r === 'end') return call.end();
        if (r) call.write(r);
      });
      call.on('end', () => call.end());
    },
  };
  if (opts.batch !== false) {
    const enabled = opts.batch ?? true;
    impl.VerifyBatchStream = (call: grpc.ServerDuplexStream<{ checks: Array<{ id: number; token: string }> }, unknown>) => {
      if (typeof enabled === 'object' && !enabled.current) {
        call.emit('error', Object.assign(new Error('not implemented'), { code: grpc.status.UNIMPLEMENTED }));
        return;
      }
      seen.batchStreams++;
      call.on('data', (req: { checks: Array<{ id: number; token: string }> }) => {
        seen.batches.push(req.checks.length);
        const results: Array<Record<string, unknown>> = [];
        for (const c of req.checks) {
          const r = respond(c);
          if (r === 'end') return call.end();
          if (r) results.push(r);
        }
        if (opts.scatter) for (const r of results.reverse()) call.write({ results: [r] });
        else if (results.length > 0) call.write({ results });
      });
      call.on('end', () => call.end());
    };
  }
  const server = new grpc.Server();
  server.addService(serviceDefinition(VERIFIER_PROTO, VERIFIER_SERVICE), impl);
  const bound = await bindServer(server, `127.0.0.1:${opts.port ?? 0}`);
  return { server, port: bound, seen };
}

type ClientOptions = Omit<VerifierClientOptions, 'address' | 'internalToken'>;

describe.each([
  { name: 'a verifier with VerifyBatchStream', batch: true },
  { name: 'a verifier that predates VerifyBatchStream (fallback to VerifyStream)', batch: false },
])('StreamingVerifierClient against $name', ({ batch }) => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  const client = (port: number, opts: ClientOptions = {}): VerifierClient => {
    const c = createVerifierClient({ address: `127.0.0.1:${port}`, internalToken: 'internal-token-for-tests-0123456789abcdef', ...opts });
    cleanup.push(() => c.close());
    return c;
  };

  it('maps verdicts from the stream, many in flight at once', async () => {
    const mode = { current: 'answer' as Mode };
    const { server, port } = await fakeVerifier(mode, { batch });
    cleanup.push(() => stopServer(server));
    const c = client(port);
    const results = await Promise.all(['good', 'bad', 'good'].map((t) => c.verify(t)));
    expect(results[0]).toEqual({ valid: true, identity: { tenantId: 't', userId: 'u', expiresAt: 42, keySlot: 'previous', keyVersion: 3 } });
    expect(results[1]).toEqual({ valid: false, reason: 'bad_signature' });
    expect(results[2]!.valid).toBe(true);
  });

  it('a clean close() logs no warning: the stream it cancels did not fail (#29)', async () => {
    const mode = { current: 'answer' as Mode };
    const { server, port } = await fakeVerifier(mode, { batch });
    cleanup.push(() => stopServer(server));
    const lines: string[] = [];
    const logger = createLogger({ service: 'test', level: 'debug', destination: { write: (l: string) => void lines.push(l) } });
    const c = createVerifierClient({ address: `127.0.0.1:${port}`, internalToken: 'internal-token-for-tests-0123456789abcdef', logger });
    expect((await c.verify('good')).valid).toBe(true);
    c.close();
    // The cancellation reaches the stream's error handler on a later turn.
    await new Promise((r) => setTimeout(r, 200));
    expect(lines.filter((l) => (JSON.parse(l) as { level: number }).level >= 40)).toEqual([]);
  });

  it('fails closed with auth_unavailable when nothing listens', async () => {
    const { server, port } = await fakeVerifier({ current: 'answer' }, { batch });
    await stopServer(server);
    await expect(client(port).verify('good')).rejects.toMatchObject({ code: 'auth_unavailable' });
  });

  it('fails closed when the verifier does not answer in time or cannot decide', async () => {
    const mode = { current: 'silent' as Mode };
    const { server, port } = await fakeVerifier(mode, { batch });
    cleanup.push(() => stopServer(server));
    const c = client(port, { deadlineMs: 100 });
    await expect(c.verify('good')).rejects.toBeInstanceOf(RelayError);
    mode.current = 'unavailable';
    await expect(c.verify('good')).rejects.toMatchObject({ code: 'auth_unavailable' });
    mode.current = 'answer';
    expect((await c.verify('good')).valid).toBe(true);
  });

  it('bounds the checks in flight', async () => {
    const { server, port } = await fakeVerifier({ current: 'silent' }, { batch });
    cleanup.push(() => stopServer(server));
    const c = client(port, { deadlineMs: 200, maxInFlight: 2 });
    const pending = [c.verify('a'), c.verify('b')];
    await expect(c.verify('c')).rejects.toMatchObject({ code: 'auth_unavailable' });
    await Promise.allSettled(pending);
  });

  it('keeps refreshes to their share of the budget, so upgrades always find room', async () => {
    const mode = { current: 'silent' as Mode };
    const { server, port } = await fakeVerifier(mode, { batch });
    cleanup.push(() => stopServer(server));
    const c = client(port, { deadlineMs: 300, maxInFlight: 8, refreshShare: 0.25 });
    const pending = [c.verify('r1', 'refresh'), c.verify('r2', 'refresh')];
    await expect(c.verify('r3', 'refresh')).rejects.toMatchObject({ code: 'auth_unavailable', message: 'too many refreshes in flight' });
    // Six admissions still fit beside the two refreshes.
    for (let i = 0; i < 6; i++) pending.push(c.verify(`u${i}`));
    await expect(c.verify('u6')).rejects.toMatchObject({ message: 'too many checks in flight' });
    await Promise.allSettled(pending);
    // Settled checks give their share back.
    mode.current = 'answer';
    expect((await c.verify('good', 'refresh')).valid).toBe(true);
  });

  it('fails pending checks when the verifier goes away and recovers when it is back', async () => {
    const mode = { current: 'answer' as Mode };
    const first = await fakeVerifier(mode, { batch });
    const c = client(first.port, { deadlineMs: 5000 });
    expect((await c.verify('good')).valid).toBe(true);
    mode.current = 'silent';
    const pending = c.verify('good');
    first.server.forceShutdown();
    await expect(pending).rejects.toMatchObject({ code: 'auth_unavailable' });
    mode.current = 'answer';
    const second = await fakeVerifier(mode, { batch, port: first.port });
    cleanup.push(() => stopServer(second.server));
    // grpc-js reconnects with backoff; the first call after may still see the old failure.
    let result: Awaited<ReturnType<VerifierClient['verify']>> | undefined;
    for (let i = 0; i < 50 && !result; i++) {
      result = await c.verify('good').catch(() => (new Promise((r) => setTimeout(r, 50)).then(() => undefined)));
    }
    expect(result?.valid).toBe(true);
  });

  it('sends a check again, once, on a new stream when its stream ends unanswered (a verifier stopping)', async () => {
    const mode = { current: 'drop' as Mode };
    const { server, port } = await fakeVerifier(mode, { batch });
    cleanup.push(() => stopServer(server));
    const c = client(port, { deadlineMs: 5000 });
    expect((await c.verify('good')).valid).toBe(true);
    // Twice unanswered: it fails closed, well before its deadline.
    mode.current = 'drop-always';
    const t0 = Date.now();
    await expect(c.verify('good')).rejects.toMatchObject({ code: 'auth_unavailable' });
    expect(Date.now() - t0).toBeLessThan(2000);
    mode.current = 'answer';
    expect((await c.verify('good')).valid).toBe(true);
  });
});

/** Resolves on the next turn of the event loop (after its I/O). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('StreamingVerifierClient batching (VerifyBatchStream)', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  const client = (port: number, opts: ClientOptions = {}): VerifierClient => {
    const c = createVerifierClient({ address: `127.0.0.1:${port}`, internalToken: 'internal-token-for-tests-0123456789abcdef', ...opts });
    cleanup.push(() => c.close());
    return c;
  };
  const start = async (mode: Mode, opts: FakeOptions = {}) => {
    const f = await fakeVerifier({ current: mode }, opts);
    cleanup.push(() => stopServer(f.server));
    return f;
  };

  it('writes the checks issued on one turn of the event loop as one message, a later check in the next', async () => {
    const { port, seen } = await start('answer');
    const c = client(port);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => c.verify(i % 2 ? 'bad' : 'good')));
    results.forEach((r, i) => expect(r.valid).toBe(i % 2 === 0));
    expect((await c.verify('good')).valid).toBe(true);
    expect(seen.batches).toEqual([10, 1]);
    expect(seen).toMatchObject({ batchStreams: 1, singleStreams: 0 });
  });

  it('checks issued on later turns while the last message is unanswered go out together in one message (connects arriving one a turn)', async () => {
    // A silent verifier and a long linger: the first message is never answered, so the three
    // checks of the next three turns wait together and leave as one message when the linger ends.
    const f = await fakeVerifier({ current: 'silent' });
    cleanup.push(() => stopServer(f.server));
    const c = client(f.port, { lingerMs: 300, deadlineMs: 5000 });
    const checks = [c.verify('good')];
    await nextTurn();
    for (let i = 0; i < 3; i++) {
      checks.push(c.verify('good'));
      await nextTurn();
    }
    await expect.poll(() => f.seen.batches, { timeout: 3000, interval: 10 }).toEqual([1, 3]);
    c.close();
    await Promise.allSettled(checks);
  });

  it('an answer releases the checks waiting for it at once (a linger of 10 s never comes into play)', async () => {
    const { port, seen } = await start('answer');
    const c = client(port, { lingerMs: 10_000 });
    const started = Date.now();
    const checks = [c.verify('good')];
    for (let i = 0; i < 5; i++) {
      await nextTurn();
      checks.push(c.verify('good'));
    }
    const results = await Promise.all(checks);
    expect(results.every((r) => r.valid)).toBe(true);
    expect(Date.now() - started, 'answered without waiting out the linger').toBeLessThan(5000);
    expect(seen.batches.reduce((a, b) => a + b, 0)).toBe(6);
  });

  it('gives each check the answer to its own id, whatever the order and grouping of the responses', async () => {
    const { port } = await start('answer', { scatter: true });
    const c = client(port);
    const tokens = ['good', 'bad', 'bad', 'good', 'bad', 'good', 'good'];
    const results = await Promise.all(tokens.map((t) => c.verify(t)));
    results.forEach((r, i) => expect(r).toEqual(tokens[i] === 'good' ? expect.objectContaining({ valid: true }) : { valid: false, reason: 'bad_signature' }));
  });

  it('fails closed only the checks of a batch the verifier could not decide', async () => {
    const { port, seen } = await start('answer');
    const c = client(port);
    const settled = await Promise.allSettled(['good', 'unavailable', 'bad', 'unavailable'].map((t) => c.verify(t)));
    expect(seen.batches).toEqual([4]);
    expect(settled[0]).toMatchObject({ status: 'fulfilled', value: { valid: true } });
    expect(settled[1]).toMatchObject({ status: 'rejected', reason: { code: 'auth_unavailable', message: 'verifier could not decide' } });
    expect(settled[2]).toMatchObject({ status: 'fulfilled', value: { valid: false, reason: 'bad_signature' } });
    expect(settled[3]).toMatchObject({ status: 'rejected', reason: { code: 'auth_unavailable' } });
  });

  it('splits one turn\'s checks into messages of at most maxBatch, never more than MAX_VERIFY_BATCH', async () => {
    const { port, seen } = await start('answer');
    const all = (c: VerifierClient, n: number) => Promise.all(Array.from({ length: n }, () => c.verify('good')));
    await all(client(port), 600);
    expect(seen.batches).toEqual([MAX_VERIFY_BATCH, MAX_VERIFY_BATCH, 600 - 2 * MAX_VERIFY_BATCH]);
    seen.batches.length = 0;
    await all(client(port, { maxBatch: 4 }), 10);
    expect(seen.batches).toEqual([4, 4, 2]);
    seen.batches.length = 0;
    await all(client(port, { maxBatch: 10_000 }), 300);
    expect(seen.batches).toEqual([MAX_VERIFY_BATCH, 300 - MAX_VERIFY_BATCH]);
  });

  it('falls back to VerifyStream against a verifier that predates the batch, without spending the check\'s one resend', async () => {
    // The old verifier then drops the VerifyStream once: the check is still
    // sent once more, so the UNIMPLEMENTED answer did not count as a resend.
    const { port, seen } = await start('drop', { batch: false });
    const c = client(port, { deadlineMs: 5000 });
    expect((await c.verify('good')).valid).toBe(true);
    expect(seen).toMatchObject({ batchStreams: 0, singleStreams: 2, singles: 2 });
    // Later checks stay on the open VerifyStream.
    const results = await Promise.all(['good', 'bad'].map((t) => c.verify(t)));
    expect(results.map((r) => r.valid)).toEqual([true, false]);
    expect(seen).toMatchObject({ singleStreams: 2, singles: 4 });
  });

  it('tries the batch again on a stream opened batchRetryMs after the fallback (a verifier upgraded meanwhile)', async () => {
    const batch = { current: false };
    const mode = { current: 'answer' as Mode };
    const f = await fakeVerifier(mode, { batch });
    cleanup.push(() => stopServer(f.server));
    const c = client(f.port, { deadlineMs: 5000, batchRetryMs: 100 });
    expect((await c.verify('good')).valid).toBe(true);
    expect(f.seen).toMatchObject({ batchStreams: 0, singleStreams: 1 });
    batch.current = true;
    // The time this test is about; the stream then ends (the old verifier stopping).
    await new Promise((r) => setTimeout(r, 150));
    mode.current = 'drop';
    expect((await c.verify('good')).valid).toBe(true);
    expect(f.seen).toMatchObject({ batchStreams: 1, batches: [1] });
  });
});
