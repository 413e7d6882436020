import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createRedis } from '@service-relay/core';
import { RedisTenantEventBus } from '@service-relay/tenant-events';
import { signToken, uniqueRedisPrefix } from '@service-relay/testkit';
import { createVerifierClient, type VerifierClient } from '@service-relay/verifier-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from './config';
import { createServer, type VerifierServer } from './server';
import { FakeKeyService } from './test-support/fake-key-service';
import { freePort, RedisProcess } from './test-support/redis-process';

const INTERNAL_TOKEN = randomBytes(24).toString('base64url');
const logger = createLogger({ service: 'test', level: 'silent' });

describe('a Redis restart in the middle of verification', () => {
  const prefix = uniqueRedisPrefix('verifier');
  let redis: RedisProcess;
  let publisher: RedisTenantEventBus;
  let registry: FakeKeyService;
  const buses: RedisTenantEventBus[] = [];
  const servers: VerifierServer[] = [];
  const clients: VerifierClient[] = [];

  beforeAll(async () => {
    redis = new RedisProcess(await freePort());
    await redis.start();
    publisher = new RedisTenantEventBus(redis.url, prefix, logger);
    registry = new FakeKeyService(INTERNAL_TOKEN, publisher);
    const addr = await registry.start();
    const env = {
      INTERNAL_TOKEN,
      REGISTRY_GRPC_ADDR: addr,
      VERIFIER_GRPC_PORT: '0',
      VERIFIER_HTTP_PORT: '0',
      REDIS_URL: redis.url,
      REDIS_PREFIX: prefix,
      SECRETS_KEY: randomBytes(32).toString('base64'),
    };
    for (let i = 0; i < 2; i++) {
      // The bus is injected only so the test can watch its connection.
      const bus = new RedisTenantEventBus(redis.url, prefix, logger);
      const server = createServer(loadConfig(env, { standalone: true }), { logger, bus });
      await server.start();
      buses.push(bus);
      servers.push(server);
      clients.push(createVerifierClient({ address: `127.0.0.1:${server.grpcPort}`, internalToken: INTERNAL_TOKEN, deadlineMs: 5000 }));
    }
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    for (const s of servers) await s.stop();
    for (const b of buses) await b.close();
    await publisher?.close();
    await registry?.stop();
    await redis?.kill();
  });

  it('loses no valid verification and accepts nothing invalid', async () => {
    const a = registry.create();
    const c = registry.create();
    const nowS = Math.floor(Date.now() / 1000);
    const validA = signToken({ secret: a.primary.secret, tenantId: a.tenantId, userId: randomUUID(), expiresIn: 600 });
    const badSigA = signToken({ secret: randomBytes(32).toString('base64url'), tenantId: a.tenantId, userId: randomUUID() });
    const expiredA = signToken({ secret: a.primary.secret, tenantId: a.tenantId, userId: randomUUID(), exp: nowS - 5 });
    const tokenC = signToken({ secret: c.primary.secret, tenantId: c.tenantId, userId: randomUUID(), expiresIn: 600 });

    // 0: C enabled, 1: its disable in progress (either verdict), 2: disabled.
    let phase = 0;
    let stop = false;
    let rounds = 0;
    const failures: string[] = [];
    const pump = async (client: VerifierClient, name: string) => {
      while (!stop) {
        const before = phase;
        const results = await Promise.allSettled([validA, badSigA, expiredA, tokenC].map((t) => client.verify(t)));
        const valid = results.map((r) => (r.status === 'fulfilled' ? r.value.valid : `unavailable`));
        if (valid[0] !== true) failures.push(`${name}: valid token got ${valid[0]} in round ${rounds}`);
        if (valid[1] !== false || valid[2] !== false) failures.push(`${name}: invalid token got ${valid[1]}/${valid[2]} in round ${rounds}`);
        // A round in flight while C is being disabled may see either verdict;
        // every other round must see exactly the state of the registry.
        if (before === phase && before !== 1 && valid[3] !== (before === 0)) failures.push(`${name}: tenant C token got ${valid[3]} (phase ${before}) in round ${rounds}`);
        rounds++;
      }
    };
    const pumps = clients.map((cl, i) => pump(cl, `verifier ${i}`));
    const moreRounds = async (n: number) => {
      const target = rounds + n;
      await vi.waitFor(() => expect(rounds).toBeGreaterThanOrEqual(target), { timeout: 10_000, interval: 5 });
    };

    await moreRounds(50);
    await redis.kill();
    await vi.waitFor(() => expect(buses.every((b) => !b.isConnected())).toBe(true), { timeout: 5000, interval: 5 });
    await moreRounds(50);
    // A change committed while no notice can be delivered: the verifiers pull
    // it from the feed, and the call returns once both applied it.
    phase = 1;
    expect(await registry.disable(c.tenantId)).toEqual({ delivered: 2, acknowledged: 2 });
    phase = 2;
    await moreRounds(50);

    await redis.start();
    const probe = createRedis(redis.url, { enableOfflineQueue: true });
    await vi.waitFor(
      async () => {
        expect(buses.every((b) => b.isConnected())).toBe(true);
        const [, subscribers] = (await probe.pubsub('NUMSUB', `${prefix}tenant-feed`)) as [string, number];
        expect(subscribers).toBe(2);
      },
      { timeout: 10_000, interval: 20 },
    );
    probe.disconnect();
    await moreRounds(50);
    stop = true;
    await Promise.all(pumps);

    expect(failures.slice(0, 5)).toEqual([]);
    expect(rounds).toBeGreaterThan(200);

    // And the bus works again end to end: a revocation is obeyed by both on return.
    expect(await registry.revokeAll(a.tenantId)).toEqual({ delivered: 2, acknowledged: 2 });
    for (const cl of clients) expect(await cl.verify(validA)).toEqual({ valid: false, reason: 'bad_signature' });
  });
});
