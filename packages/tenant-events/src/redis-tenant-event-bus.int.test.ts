import { Redis } from 'ioredis';
import { createLogger } from '@service-relay/core';
import { TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { describe, expect, it } from 'vitest';
import { RedisTenantEventBus } from './redis-tenant-event-bus';
import { tenantEventBusContract } from './tenant-event-bus.contract';
import { VersionTracker } from './tenant-event';

const logger = createLogger({ service: 'test', level: 'silent' });

describe('RedisTenantEventBus', () => {
  // Each consumer is its own bus, as each process would have.
  tenantEventBusContract({
    async create(n) {
      const prefix = uniqueRedisPrefix('bus');
      return {
        publisher: new RedisTenantEventBus(TEST_REDIS_URL, prefix, logger, 500),
        consumers: Array.from({ length: n }, () => new RedisTenantEventBus(TEST_REDIS_URL, prefix, logger, 500)),
      };
    },
  });

  it('tells its consumers to drop state when its connection was lost and came back', async () => {
    const prefix = uniqueRedisPrefix('bus');
    const bus = new RedisTenantEventBus(TEST_REDIS_URL, prefix, logger);
    const admin = new Redis(TEST_REDIS_URL);
    try {
      bus.subscribe(() => {});
      expect(await bus.ready()).toBe(true);
      const reset = new Promise<void>((resolve) => bus.onReset(resolve));
      const clients = (await admin.client('LIST')) as string;
      const ids = clients
        .split('\n')
        .filter((line) => line.includes(` name=${prefix}events-sub `))
        .map((line) => /\bid=(\d+)/.exec(line)![1]!);
      expect(ids).toHaveLength(1);
      await admin.client('KILL', 'ID', ids[0]!);
      await reset;
      expect(await bus.ready()).toBe(true);
    } finally {
      admin.disconnect();
      await bus.close();
    }
  });
});

describe('VersionTracker', () => {
  it('reports a jump in a tenant version as a gap', () => {
    const t = new VersionTracker(2);
    const e = (tenant_id: string, version: number) => ({ event_id: 'x', tenant_id, kind: 'rotated' as const, version, revoked_key_versions: [] });
    expect(t.observe(e('a', 1))).toBe(false);
    expect(t.observe(e('a', 2))).toBe(false);
    expect(t.observe(e('a', 4))).toBe(true);
    expect(t.observe(e('b', 9))).toBe(false);
  });
});
