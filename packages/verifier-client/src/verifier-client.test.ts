import * as grpc from '@grpc/grpc-js';
import { RelayError } from '@service-relay/core';
import { bindServer, serviceDefinition, stopServer, VERIFIER_PROTO, VERIFIER_SERVICE } from '@service-relay/grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { createVerifierClient, type VerifierClient } from './verifier-client';
import { toWire } from './verify-result';

// drop: end the stream without answering (a verifier stopping), then answer
// on the next stream; drop-always: end every stream without answering.
type Mode = 'answer' | 'silent' | 'unavailable' | 'drop' | 'drop-always';

/** A real gRPC server speaking the verifier proto, with scripted behaviour. */
async function fakeVerifier(mode: { current: Mode }, port = 0) {
  const server = new grpc.Server();
  server.addService(serviceDefinition(VERIFIER_PROTO, VERIFIER_SERVICE), {
    Verify: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.UNIMPLEMENTED }),
    VerifyStream: (call: grpc.ServerDuplexStream<{ id: number; token: string }, unknown>) => {
      call.on('data', (req: { id: number; token: string }) => {
        if (mode.current === 'silent') return;
        if (mode.current === 'drop' || mode.current === 'drop-always') {
          if (mode.current === 'drop') mode.current = 'answer';
          return call.end();
        }
        if (mode.current === 'unavailable') return call.write({ id: req.id, unavailable: true });
        const result =
          req.token === 'good'
            ? toWire({ valid: true, identity: { tenantId: 't', userId: 'u', expiresAt: 42, keySlot: 'previous', keyVersion: 3 } })
            : toWire({ valid: false, reason: 'bad_signature' });
        call.write({ id: req.id, result });
      });
      call.on('end', () => call.end());
    },
  });
  const bound = await bindServer(server, `127.0.0.1:${port}`);
  return { server, port: bound };
}

describe('StreamingVerifierClient', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  const client = (port: number, opts: { deadlineMs?: number; maxInFlight?: number; refreshShare?: number } = {}): VerifierClient => {
    const c = createVerifierClient({ address: `127.0.0.1:${port}`, internalToken: 'internal-token-for-tests-0123456789abcdef', ...opts });
    cleanup.push(() => c.close());
    return c;
  };

  it('maps verdicts from the stream, many in flight at once', async () => {
    const mode = { current: 'answer' as Mode };
    const { server, port } = await fakeVerifier(mode);
    cleanup.push(() => stopServer(server));
    const c = client(port);
    const results = await Promise.all(['good', 'bad', 'good'].map((t) => c.verify(t)));
    expect(results[0]).toEqual({ valid: true, identity: { tenantId: 't', userId: 'u', expiresAt: 42, keySlot: 'previous', keyVersion: 3 } });
    expect(results[1]).toEqual({ valid: false, reason: 'bad_signature' });
    expect(results[2]!.valid).toBe(true);
  });

  it('fails closed with auth_unavailable when nothing listens', async () => {
    const { server, port } = await fakeVerifier({ current: 'answer' });
    await stopServer(server);
    await expect(client(port).verify('good')).rejects.toMatchObject({ code: 'auth_unavailable' });
  });

  it('fails closed when the verifier does not answer in time or cannot decide', async () => {
    const mode = { current: 'silent' as Mode };
    const { server, port } = await fakeVerifier(mode);
    cleanup.push(() => stopServer(server));
    const c = client(port, { deadlineMs: 100 });
    await expect(c.verify('good')).rejects.toBeInstanceOf(RelayError);
    mode.current = 'unavailable';
    await expect(c.verify('good')).rejects.toMatchObject({ code: 'auth_unavailable' });
    mode.current = 'answer';
    expect((await c.verify('good')).valid).toBe(true);
  });

  it('bounds the checks in flight', async () => {
    const { server, port } = await fakeVerifier({ current: 'silent' });
    cleanup.push(() => stopServer(server));
    const c = client(port, { deadlineMs: 200, maxInFlight: 2 });
    const pending = [c.verify('a'), c.verify('b')];
    await expect(c.verify('c')).rejects.toMatchObject({ code: 'auth_unavailable' });
    await Promise.allSettled(pending);
  });

  it('keeps refreshes to their share of the budget, so upgrades always find room', async () => {
    const mode = { current: 'silent' as Mode };
    const { server, port } = await fakeVerifier(mode);
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
    const first = await fakeVerifier(mode);
    const c = client(first.port, { deadlineMs: 5000 });
    expect((await c.verify('good')).valid).toBe(true);
    mode.current = 'silent';
    const pending = c.verify('good');
    first.server.forceShutdown();
    await expect(pending).rejects.toMatchObject({ code: 'auth_unavailable' });
    mode.current = 'answer';
    const second = await fakeVerifier(mode, first.port);
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
    const { server, port } = await fakeVerifier(mode);
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
