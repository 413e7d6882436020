import { Redis } from 'ioredis';
import { createLogger } from '@service-relay/core';
import { TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { describe, expect, it } from 'vitest';
import { RedisTenantEventBus } from './redis-tenant-event-bus';
import { tenantEventBusContract } from './tenant-event-bus.contract';

const logger = createLogger({ service: 'test', level: 'silent' });

describe('RedisTenantEventBus', () => {
  // Each consumer is its own bus, as each process would have.
  tenantEventBusContract({
    async create(n) {
      const prefix = uniqueRedisPrefix('bus');
      return {
        publisher: new RedisTenantEventBus(TEST_REDIS_URL, prefix, logger),
        consumers: Array.from({ length: n }, () => new RedisTenantEventBus(TEST_REDIS_URL, prefix, logger)),
      };
    },
  });

  it('tells its consumers to check now when its connection was lost and came back', async () => {
    const prefix = uniqueRedisPrefix('bus');
    const bus = new RedisTenantEventBus(TEST_REDIS_URL, prefix, logger);
    const admin = new Redis(TEST_REDIS_URL);
    try {
      const notices: Array<number | undefined> = [];
      let woke!: () => void;
      const wake = new Promise<void>((r) => (woke = r));
      bus.onNotice((seq) => {
        notices.push(seq);
        if (seq === undefined) woke();
      });
      expect(await bus.ready()).toBe(true);
      const clients = (await admin.client('LIST')) as string;
      const ids = clients
        .split('\n')
        .filter((line) => line.includes(` name=${prefix}events-sub `))
        .map((line) => /\bid=(\d+)/.exec(line)![1]!);
      expect(ids).toHaveLength(1);
      await admin.client('KILL', 'ID', ids[0]!);
      await wake;
      expect(notices).toContain(undefined);
      expect(await bus.ready()).toBe(true);
    } finally {
      admin.disconnect();
      await bus.close();
    }
  });

  it('fails a notice fast when Redis cannot be reached, instead of hanging', async () => {
    const bus = new RedisTenantEventBus('redis://127.0.0.1:1', uniqueRedisPrefix('bus'), logger);
    try {
      const started = Date.now();
      await expect(bus.notify(1)).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      await bus.close();
    }
  });
});
