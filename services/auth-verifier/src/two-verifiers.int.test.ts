import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createRedis } from '@service-relay/core';
import { RedisTenantEventBus } from '@service-relay/tenant-events';
import { signToken, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { createVerifierClient, type VerifierClient, type VerifyResult } from '@service-relay/verifier-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { createServer, type VerifierServer } from './server';
import { FakeKeyService, type FakeTenant } from './test-support/fake-key-service';

const INTERNAL_TOKEN = randomBytes(24).toString('base64url');
const logger = createLogger({ service: 'test', level: 'silent' });

describe('two verifiers on one Redis obey every tenant event as soon as the publish returns', () => {
  const prefix = uniqueRedisPrefix('verifier');
  const publisher = new RedisTenantEventBus(TEST_REDIS_URL, prefix, logger);
  const registry = new FakeKeyService(INTERNAL_TOKEN, publisher);
  const servers: VerifierServer[] = [];
  const clients: VerifierClient[] = [];

  beforeAll(async () => {
    const addr = await registry.start();
    const env = {
      INTERNAL_TOKEN,
      REGISTRY_GRPC_ADDR: addr,
      VERIFIER_GRPC_PORT: '0',
      VERIFIER_HTTP_PORT: '0',
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: prefix,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'silent',
    };
    for (let i = 0; i < 2; i++) {
      const server = createServer(loadConfig(env, { standalone: true }), { logger });
      await server.start();
      servers.push(server);
      clients.push(createVerifierClient({ address: `127.0.0.1:${server.grpcPort}`, internalToken: INTERNAL_TOKEN }));
    }
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    for (const s of servers) await s.stop();
    await registry.stop();
    await publisher.close();
    const redis = createRedis(TEST_REDIS_URL, { enableOfflineQueue: true });
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });

  const both = (token: string): Promise<VerifyResult[]> => Promise.all(clients.map((c) => c.verify(token)));
  const tokenFor = (t: FakeTenant, secret = t.primary.secret) => signToken({ secret, tenantId: t.tenantId, userId: randomUUID() });
  const accepted = (slot: 'primary' | 'previous', keyVersion: number) => ({ valid: true, identity: expect.objectContaining({ keySlot: slot, keyVersion }) });
  const rejected = (reason: string) => ({ valid: false, reason });

  it('disable', async () => {
    const t = registry.create();
    const token = tokenFor(t);
    expect(await both(token)).toEqual([accepted('primary', 1), accepted('primary', 1)]);
    expect(await registry.disable(t.tenantId)).toEqual({ delivered: 2, acknowledged: 2 });
    expect(await both(token)).toEqual([rejected('tenant_disabled'), rejected('tenant_disabled')]);
    await registry.enable(t.tenantId);
    expect(await both(token)).toEqual([accepted('primary', 1), accepted('primary', 1)]);
  });

  it('rotate, expire_previous, revoke_all', async () => {
    const t = registry.create();
    const first = tokenFor(t);
    expect(await both(first)).toEqual([accepted('primary', 1), accepted('primary', 1)]);

    await registry.rotate(t.tenantId);
    const second = tokenFor(t);
    expect(await both(first)).toEqual([accepted('previous', 1), accepted('previous', 1)]);
    expect(await both(second)).toEqual([accepted('primary', 2), accepted('primary', 2)]);

    await registry.expirePrevious(t.tenantId);
    expect(await both(first)).toEqual([rejected('bad_signature'), rejected('bad_signature')]);
    expect(await both(second)).toEqual([accepted('primary', 2), accepted('primary', 2)]);

    await registry.rotate(t.tenantId);
    const third = tokenFor(t);
    expect(await both(second)).toEqual([accepted('previous', 2), accepted('previous', 2)]);
    await registry.revokeAll(t.tenantId);
    expect(await both(second)).toEqual([rejected('bad_signature'), rejected('bad_signature')]);
    expect(await both(third)).toEqual([rejected('bad_signature'), rejected('bad_signature')]);
    expect(await both(tokenFor(t))).toEqual([accepted('primary', 4), accepted('primary', 4)]);
  });

  it('shares key material through Redis: the second replica does not ask the registry again', async () => {
    const t = registry.create();
    const token = tokenFor(t);
    const before = registry.calls;
    expect((await clients[0]!.verify(token)).valid).toBe(true);
    expect((await clients[1]!.verify(token)).valid).toBe(true);
    expect(registry.calls - before).toBe(1);
  });
});
