import * as grpc from '@grpc/grpc-js';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { createLogger } from '@service-relay/core';
import { clientConstructor, internalMetadata, MAX_VERIFY_BATCH, VERIFIER_PROTO, VERIFIER_SERVICE, type VerifyBatchResponse, type VerifyStreamResponse } from '@service-relay/grpc';
import { MemoryTenantEventBus } from '@service-relay/tenant-events';
import { signToken } from '@service-relay/testkit';
import { createVerifierClient, type VerifierClient } from '@service-relay/verifier-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { createServer, type VerifierServer } from './server';
import { FakeKeyService } from './test-support/fake-key-service';

const INTERNAL_TOKEN = 'internal-token-for-tests-0123456789abcdef';

describe('auth-verifier server (gRPC + ops, fake registry, in-process bus)', () => {
  const logLines: string[] = [];
  const logger = createLogger({
    service: 'auth-verifier',
    level: 'debug',
    destination: new Writable({ write: (chunk: Buffer, _enc, cb) => (logLines.push(chunk.toString()), cb()) }),
  });
  const bus = new MemoryTenantEventBus();
  const registry = new FakeKeyService(INTERNAL_TOKEN, bus);
  let server: VerifierServer;
  let client: VerifierClient;
  let unary: grpc.Client & Record<string, (...a: unknown[]) => unknown>;
  const tenant = registry.create();

  beforeAll(async () => {
    const addr = await registry.start();
    const config = loadConfig({ INTERNAL_TOKEN, REGISTRY_GRPC_ADDR: addr, VERIFIER_GRPC_PORT: '0', VERIFIER_HTTP_PORT: '0', LOG_LEVEL: 'debug' }, { standalone: false });
    server = createServer(config, { bus, logger });
    await server.start();
    client = createVerifierClient({ address: `127.0.0.1:${server.grpcPort}`, internalToken: INTERNAL_TOKEN, deadlineMs: 3000 });
    const Ctor = clientConstructor(VERIFIER_PROTO, VERIFIER_SERVICE);
    unary = new Ctor(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure()) as never;
  });

  afterAll(async () => {
    client.close();
    unary.close();
    await server.stop();
    await registry.stop();
  });

  const verifyUnary = (token: string, metadata = internalMetadata(INTERNAL_TOKEN)) =>
    new Promise<{ err: grpc.ServiceError | null; res: Record<string, unknown> | undefined }>((resolve) =>
      (unary.Verify as (r: unknown, m: grpc.Metadata, o: unknown, cb: (e: grpc.ServiceError | null, r?: Record<string, unknown>) => void) => void)(
        { token },
        metadata,
        { deadline: Date.now() + 3000 },
        (err, res) => resolve({ err, res }),
      ),
    );

  it('answers neither RPC without the internal token: UNAUTHENTICATED, no verdict, no reason', async () => {
    const token = signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId: randomUUID() });
    for (const md of [new grpc.Metadata(), internalMetadata(`${INTERNAL_TOKEN}x`), internalMetadata('')]) {
      const { err, res } = await verifyUnary(token, md);
      expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(res).toBeUndefined();
    }
    const stranger = createVerifierClient({ address: `127.0.0.1:${server.grpcPort}`, internalToken: 'not-the-internal-token-0123456789abc', deadlineMs: 3000 });
    try {
      await expect(stranger.verify(token)).rejects.toMatchObject({ code: 'auth_unavailable' });
    } finally {
      stranger.close();
    }
  });

  it('Verify (unary) accepts a valid token and reports slot and key version', async () => {
    const userId = randomUUID();
    const { err, res } = await verifyUnary(signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId }));
    expect(err).toBeNull();
    expect(res).toMatchObject({ valid: true, tenant_id: tenant.tenantId, user_id: userId, key_slot: 'KEY_SLOT_PRIMARY', key_version: 1, reason: '' });
  });

  it('Verify (unary) rejects with an internal reason, not a gRPC error', async () => {
    const { err, res } = await verifyUnary('not-a-token');
    expect(err).toBeNull();
    expect(res).toMatchObject({ valid: false, reason: 'malformed' });
  });

  it('the shared client (VerifyBatchStream) matches answers to checks by id, valid and invalid mixed', async () => {
    const good = signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId: randomUUID() });
    const bad = signToken({ secret: 'x'.repeat(43), tenantId: tenant.tenantId, userId: randomUUID() });
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => client.verify(i % 2 ? bad : good)));
    results.forEach((r, i) => expect(r.valid).toBe(i % 2 === 0));
    expect(results[1]).toEqual({ valid: false, reason: 'bad_signature' });
  });

  /**
   * Writes `requests` on a raw VerifyStream or VerifyBatchStream and collects
   * the answers until `expected` checks are answered or the stream ends.
   */
  const rawStream = (method: 'VerifyStream' | 'VerifyBatchStream', requests: unknown[], expected: number, metadata = internalMetadata(INTERNAL_TOKEN)) =>
    new Promise<{ answers: VerifyStreamResponse[]; messages: number; err: grpc.ServiceError | undefined }>((resolve) => {
      const call = (unary[method] as (md: grpc.Metadata, o: unknown) => grpc.ClientDuplexStream<unknown, VerifyBatchResponse & VerifyStreamResponse>)(metadata, {
        deadline: Date.now() + 3000,
      });
      const answers: VerifyStreamResponse[] = [];
      let messages = 0;
      let err: grpc.ServiceError | undefined;
      const finish = () => resolve({ answers, messages, err });
      call.on('data', (msg: VerifyBatchResponse & VerifyStreamResponse) => {
        messages++;
        answers.push(...(method === 'VerifyBatchStream' ? msg.results : [msg]));
        if (answers.length >= expected) call.end();
      });
      call.on('error', (e: grpc.ServiceError) => {
        err = e;
        finish();
      });
      call.on('end', finish);
      for (const r of requests) call.write(r);
      if (expected === 0) call.end();
    });
  const byId = (answers: VerifyStreamResponse[]) => new Map(answers.map((a) => [a.id, a]));
  const verifications = async (result: string) => {
    const text = await (await fetch(`http://127.0.0.1:${server.httpPort}/metrics`)).text();
    let n = 0;
    for (const m of text.matchAll(/^relay_verifier_verifications_total\{([^}]*)\} (\d+)/gm)) if (m[1]!.includes(`result="${result}"`)) n += Number(m[2]);
    return n;
  };

  it('VerifyStream (one check per message) is still served, for callers older than VerifyBatchStream', async () => {
    const good = signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId: randomUUID() });
    const { answers, err } = await rawStream('VerifyStream', [{ id: 7, token: good }, { id: 8, token: 'not-a-token' }], 2);
    expect(err).toBeUndefined();
    expect(byId(answers).get(7)).toMatchObject({ unavailable: false, result: { valid: true, tenant_id: tenant.tenantId } });
    expect(byId(answers).get(8)).toMatchObject({ unavailable: false, result: { valid: false, reason: 'malformed' } });
  });

  it('VerifyBatchStream judges every check of a message by its id, counts each in the metrics, answers those decided at once in one message', async () => {
    const good = () => signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId: randomUUID() });
    const bad = signToken({ secret: 'x'.repeat(43), tenantId: tenant.tenantId, userId: randomUUID() });
    // The tenant's keys are cached by the tests above, so all 20 are decided at once.
    expect((await client.verify(good())).valid).toBe(true);
    const checks = Array.from({ length: 20 }, (_, i) => ({ id: 1000 + i, token: i % 4 === 3 ? bad : i % 4 === 2 ? 'not-a-token' : good() }));
    const [valid0, invalid0] = [await verifications('valid'), await verifications('invalid')];
    const { answers, messages, err } = await rawStream('VerifyBatchStream', [{ checks }], checks.length);
    expect(err).toBeUndefined();
    expect(messages).toBe(1);
    const got = byId(answers);
    checks.forEach((c, i) => {
      const reason = i % 4 === 3 ? 'bad_signature' : i % 4 === 2 ? 'malformed' : '';
      expect(got.get(c.id)).toMatchObject({ unavailable: false, result: { valid: reason === '', reason } });
    });
    expect(await verifications('valid')).toBe(valid0 + 10);
    expect(await verifications('invalid')).toBe(invalid0 + 10);
  });

  it('VerifyBatchStream requires the internal token and refuses a message of more than MAX_VERIFY_BATCH checks, judging none of it', async () => {
    const token = signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId: randomUUID() });
    const denied = await rawStream('VerifyBatchStream', [{ checks: [{ id: 1, token }] }], 1, internalMetadata(`${INTERNAL_TOKEN}x`));
    expect(denied.err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(denied.answers).toEqual([]);
    const valid0 = await verifications('valid');
    const checks = Array.from({ length: MAX_VERIFY_BATCH + 1 }, (_, i) => ({ id: i + 1, token }));
    const tooMany = await rawStream('VerifyBatchStream', [{ checks }], checks.length);
    expect(tooMany.err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(tooMany.err?.details).toContain(`at most ${MAX_VERIFY_BATCH} checks`);
    expect(tooMany.answers).toEqual([]);
    expect(await verifications('valid')).toBe(valid0);
    // Exactly MAX_VERIFY_BATCH is fine.
    const full = await rawStream('VerifyBatchStream', [{ checks: checks.slice(1) }], MAX_VERIFY_BATCH);
    expect(full.err).toBeUndefined();
    expect(full.answers.filter((a) => a.result?.valid)).toHaveLength(MAX_VERIFY_BATCH);
  });

  it('VerifyBatchStream answers unavailable for the checks it cannot decide and the verdict for the rest of the same message', async () => {
    const known = signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId: randomUUID() });
    expect((await client.verify(known)).valid).toBe(true);
    const t = registry.create();
    const unknown = signToken({ secret: t.primary.secret, tenantId: t.tenantId, userId: randomUUID() });
    registry.down = true;
    try {
      const { answers, err } = await rawStream('VerifyBatchStream', [{ checks: [{ id: 1, token: unknown }, { id: 2, token: known }, { id: 3, token: 'not-a-token' }] }], 3);
      expect(err).toBeUndefined();
      const got = byId(answers);
      expect(got.get(1)).toMatchObject({ unavailable: true, result: null });
      expect(got.get(2)).toMatchObject({ unavailable: false, result: { valid: true } });
      expect(got.get(3)).toMatchObject({ unavailable: false, result: { valid: false, reason: 'malformed' } });
    } finally {
      registry.down = false;
    }
  });

  it('obeys a tenant event before the publish returns', async () => {
    const t = registry.create();
    const token = signToken({ secret: t.primary.secret, tenantId: t.tenantId, userId: randomUUID() });
    expect((await client.verify(token)).valid).toBe(true);
    await registry.disable(t.tenantId);
    expect(await client.verify(token)).toEqual({ valid: false, reason: 'tenant_disabled' });
  });

  it('fails closed when the registry is down and nothing is cached: UNAVAILABLE (unary), unavailable (stream)', async () => {
    const t = registry.create();
    const token = signToken({ secret: t.primary.secret, tenantId: t.tenantId, userId: randomUUID() });
    registry.down = true;
    try {
      const { err } = await verifyUnary(token);
      expect(err?.code).toBe(grpc.status.UNAVAILABLE);
      await expect(client.verify(token)).rejects.toMatchObject({ code: 'auth_unavailable' });
    } finally {
      registry.down = false;
    }
    expect((await client.verify(token)).valid).toBe(true);
  });

  it('serves grpc.health.v1, /healthz, /readyz and /metrics', async () => {
    const Health = clientConstructor('grpc/health/v1/health.proto', 'grpc.health.v1.Health');
    const health = new Health(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (...a: unknown[]) => unknown>;
    const status = await new Promise((resolve, reject) =>
      (health.Check as (r: unknown, cb: (e: Error | null, r?: { status: string }) => void) => void)({ service: VERIFIER_SERVICE }, (e, r) => (e ? reject(e) : resolve(r?.status))),
    );
    health.close();
    expect(status).toBe('SERVING');

    const base = `http://127.0.0.1:${server.httpPort}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ checks: { registry: true } });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/relay_verifier_verifications_total\{[^}]*result="valid"/);
    expect(metrics).toMatch(/relay_verifier_verifications_total\{[^}]*result="invalid",reason="bad_signature"/);
    expect(metrics).toMatch(/relay_verifier_key_lookups_total\{[^}]*layer="local"/);
    expect(metrics).toMatch(/relay_verifier_key_lookups_total\{[^}]*layer="registry"/);
    expect(metrics).toContain('relay_verifier_verify_duration_seconds_bucket');
    expect((await fetch(`${base}/nope`)).status).toBe(404);
  });

  it('never logs a token or a secret', () => {
    const all = logLines.join('');
    expect(all.length).toBeGreaterThan(0);
    for (const t of registry.tenants.values()) expect(all).not.toContain(t.primary.secret);
    expect(all).not.toContain(INTERNAL_TOKEN);
    expect(all).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
  });
});
