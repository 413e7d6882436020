import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, systemClock } from '@service-relay/core';
import { InProcessWebhookEvents } from '@service-relay/webhook-events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import { createDb } from '../db/create-db';
import type { Db } from '../db/db';
import { TenantStore } from '../store/tenant-store';
import { WebhookStore } from '../store/webhook-store';
import { WebhookSender } from './webhook-sender';
import { createWebhookEventSource } from './webhook-source';

/**
 * A read whose storing committed but answered its caller too late (a
 * statement timeout under load, the registry's loop stalled) is read and
 * stored again. Before, the second storing gave the same events new ids, and
 * an endpoint got each twice: the likeliest cause of tests/webhooks.test.ts
 * seeing a user_connected and a user_disconnected twice in a loaded full run.
 */
describe('webhook sender: a read stored late is not stored twice', () => {
  const dir = mkdtempSync(join(tmpdir(), 'registry-sender-route-'));
  const logger = createLogger({ service: 'test', level: 'silent' });
  const events = new InProcessWebhookEvents();
  let db: Db;
  let store: WebhookStore;
  let tenants: TenantStore;
  let sender: WebhookSender;
  /** Each storing's outcome, in call order: 'lost' (committed, then the answer thrown away), or what the store answered. */
  const outcomes: Array<'lost' | { routed: number; stored: boolean }> = [];

  beforeAll(async () => {
    db = await createDb({ kind: 'pglite', dir });
    const crypto = new TenantCrypto(randomBytes(32));
    tenants = new TenantStore(db, crypto, systemClock);
    store = new WebhookStore(db, tenants.feed);
    // The first storing commits and then fails as a timed-out statement would.
    const flaky = Object.create(store) as WebhookStore;
    flaky.route = async (...args) => {
      const answer = await store.route(...args);
      if (outcomes.length === 0) {
        outcomes.push('lost');
        throw new Error('Query read timeout');
      }
      outcomes.push(answer);
      return answer;
    };
    sender = new WebhookSender({
      store: flaky,
      source: createWebhookEventSource({ url: undefined, prefix: 'test:' } as never, events, logger),
      crypto,
      settings: { allowHttp: true, retryForMs: 86_400_000, retryBaseMs: 60_000, retryMaxMs: 60_000, batchMax: 100, batchWaitMs: 60_000, timeoutMs: 1000, leaseMs: 10_000 },
      clock: systemClock,
      logger,
      metrics: { request: () => {}, events: () => {}, backlog: () => {} },
    });
  });
  afterAll(async () => {
    await sender?.stop();
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stores each event once, under one id, and goes on from the stored position', async () => {
    const { tenant } = await tenants.create();
    const endpointId = randomUUID();
    // Nothing is sent: the batch waits a minute for more (WEBHOOK_BATCH_WAIT_MS), so the queue shows what was stored.
    await store.create({ endpointId, tenantId: tenant.tenantId, url: 'http://127.0.0.1:9/hook', events: ['channel_occupied'], secret: 'sealed', now: new Date() });
    for (const channel of ['a', 'b', 'c']) events.push({ type: 'channel_occupied', tenantId: tenant.tenantId, channel, ms: Date.now() });
    sender.start();

    // The lost answer, then the same read again (given back, read anew): the position has moved.
    await vi.waitFor(() => expect(outcomes).toHaveLength(2), { timeout: 10_000, interval: 20 });
    expect(outcomes).toEqual(['lost', { routed: 0, stored: false }]);
    const queued = await store.queued(endpointId, 100);
    expect(queued.map((d) => (d.event as { channel: string }).channel)).toEqual(['a', 'b', 'c']);
    expect(new Set(queued.map((d) => d.eventId)).size).toBe(3);

    // Later events are stored after it, once each.
    events.push({ type: 'channel_occupied', tenantId: tenant.tenantId, channel: 'd', ms: Date.now() });
    await vi.waitFor(() => expect(outcomes).toHaveLength(3), { timeout: 10_000, interval: 20 });
    expect(outcomes[2]).toEqual({ routed: 1, stored: true });
    expect((await store.queued(endpointId, 100)).map((d) => (d.event as { channel: string }).channel)).toEqual(['a', 'b', 'c', 'd']);
  });
});
