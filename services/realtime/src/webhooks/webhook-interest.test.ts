import { randomUUID } from 'node:crypto';
import { createLogger } from '@service-relay/core';
import { ManualTenantFeed } from '@service-relay/tenant-events';
import { FakeVerifier } from '@service-relay/testkit';
import type { WebhookEventRecord } from '@service-relay/webhook-events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemoryWebhookInterest } from '../test-support/memory-webhook-interest';
import { issueToken, startRealtime, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { WebhookInterest } from './webhook-interest';

const ALL = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'user_connected', 'user_disconnected'] as const;

describe('WebhookInterest (which events a tenant wants, #32)', () => {
  const logger = createLogger({ service: 'test', level: 'silent' });
  const setup = () => {
    const feed = new ManualTenantFeed();
    const source = new MemoryWebhookInterest();
    const interest = new WebhookInterest({ source, feed, logger });
    feed.subscribe((e) => interest.onEvent(e));
    feed.onReset(() => interest.onReset());
    return { feed, source, interest };
  };

  it('follows the registry, then the feed: the newest set wins, a reset forgets; not held or not current, it wants everything', async () => {
    const { feed, source, interest } = setup();
    const t = randomUUID();
    // Not held yet: every event (fail open), and the tenant is asked for.
    expect(interest.wants(t, 'member_added')).toBe(true);
    await interest.load(t);
    expect(source.calls).toBe(1);
    expect(ALL.map((type) => interest.wants(t, type))).toEqual(ALL.map(() => false));
    await feed.push({ tenant_id: t, kind: 'webhooks', version: 1, revoked_key_versions: [], detail: source.set(t, ['channel_vacated', 'user_disconnected']) });
    expect(ALL.filter((type) => interest.wants(t, type))).toEqual(['channel_vacated', 'user_disconnected']);
    // An older version does not undo a newer one.
    await feed.push({ tenant_id: t, kind: 'webhooks', version: 1, revoked_key_versions: [], detail: { webhook_events: [], webhooks_version: 0 } });
    expect(interest.wants(t, 'channel_vacated')).toBe(true);
    expect(interest.wants(t, 'member_added')).toBe(false);
    // Not current: nothing held is trusted.
    feed.setCurrent(false);
    expect(interest.wants(t, 'member_added')).toBe(true);
    feed.setCurrent(true);
    await feed.reset();
    expect(interest.size).toBe(0);
    expect(interest.wants(t, 'member_added')).toBe(true);
  });

  it('a registry that cannot answer leaves the tenant wanting everything, asked again later; an unreadable change stops the feed', async () => {
    const { feed, source, interest } = setup();
    const t = randomUUID();
    source.failing = true;
    // Wanted (fail open); the question it starts fails and is not kept.
    expect(interest.wants(t, 'user_connected')).toBe(true);
    await interest.load(t);
    expect(interest.wants(t, 'user_connected')).toBe(true);
    await interest.load(t);
    source.failing = false;
    await interest.load(t);
    expect(interest.wants(t, 'user_connected')).toBe(false);
    expect(() => interest.onEvent({ seq: 99, tenant_id: t, kind: 'webhooks', version: 1, revoked_key_versions: [], detail: { webhook_events: ['nope'], webhooks_version: 2 } })).toThrow(/unreadable/);
    await feed.push({ tenant_id: t, kind: 'deleted', version: 2, revoked_key_versions: [] });
    expect(interest.size).toBe(0);
  });
});

/**
 * One embedded instance (the in-process drivers) handing events to a sink as
 * the launcher's registry would take them: only the events a tenant wants
 * are recorded, and the counts are kept all along, so an endpoint that
 * appears while a channel is occupied gets its vacated (not an occupied).
 */
describe('webhook events recorded only when wanted (one instance, embedded drivers)', () => {
  const verifier = new FakeVerifier();
  const source = new MemoryWebhookInterest();
  const feed = new ManualTenantFeed();
  const records: WebhookEventRecord[] = [];
  const waiters: Array<() => void> = [];
  let rt: RealtimeInstance;
  const clients: WsTestClient[] = [];
  const connect = async (tenantId: string, userId: string) => {
    const { token } = issueToken(verifier, { tenantId, userId });
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return c;
  };
  const of = (tenantId: string) => records.filter((r) => r.tenantId === tenantId).map((r) => `${r.type}:${r.channel ?? '-'}:${r.userId ?? '-'}`);
  const until = async (done: () => boolean) => {
    const deadline = Date.now() + 5000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error('events not recorded in time');
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({
      verifier,
      feed,
      webhookInterest: source,
      webhookEvents: (r) => {
        records.push(r);
        for (const w of waiters.splice(0)) w();
      },
    });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('a tenant that wants nothing has nothing recorded; one whose endpoint appears mid-way gets the events from then on, a vacated without the occupied', async () => {
    const [none, w] = [randomUUID(), randomUUID()];
    const [a, b, n] = [randomUUID(), randomUUID(), randomUUID()];
    const room = (t: string) => topicFor(t, 'presence:room');
    // Tenant `none` connects, subscribes, unsubscribes (every step acknowledged, so decided).
    const cn = await connect(none, n);
    await cn.request({ type: 'subscribe', topic: room(none) });
    await cn.request({ type: 'unsubscribe', topic: room(none) });
    await cn.close();
    // A of tenant w occupies the room before w wants anything.
    const ca = await connect(w, a);
    await ca.request({ type: 'subscribe', topic: room(w) });
    expect(records).toEqual([]);
    // w's endpoint appears: the change is applied before it counts as applied (the admin call's 200).
    await feed.push({ tenant_id: w, kind: 'webhooks', version: 1, revoked_key_versions: [], detail: source.set(w, [...ALL]) });
    const cb = await connect(w, b);
    await cb.request({ type: 'subscribe', topic: room(w) });
    await ca.request({ type: 'unsubscribe', topic: room(w) });
    await cb.request({ type: 'unsubscribe', topic: room(w) });
    await cb.close();
    await ca.close();
    await until(() => of(w).filter((e) => e.startsWith('user_disconnected')).length === 2);
    // Three stores count occupancy, members and connections: their events are in order per store, not across them.
    expect(of(w).sort()).toEqual(
      [
        `user_connected:-:${b}`,
        `member_added:presence:room:${b}`,
        `member_removed:presence:room:${a}`,
        `member_removed:presence:room:${b}`,
        `channel_vacated:presence:room:-`,
        `user_disconnected:-:${b}`,
        `user_disconnected:-:${a}`,
      ].sort(),
    );
    expect(of(w).filter((e) => e.startsWith('member_removed'))).toEqual([`member_removed:presence:room:${a}`, `member_removed:presence:room:${b}`]);
    expect(of(none)).toEqual([]);
    // Each tenant was asked for once, at its first connection.
    expect(source.calls).toBe(2);
  });
});
