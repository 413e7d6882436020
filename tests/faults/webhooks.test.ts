import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookEvent } from '../../packages/host/src/index';
import { WebhookReceiver } from '../support/webhook-receiver';
import { openSocket, subscribe, Tenant } from './support/probes';
import { useFaultStack } from './support/suite';

const PRESENCE_TTL_MS = 1500;

/**
 * Webhooks (#32) through faults, on the stack's own Redis (AOF, fsync
 * always) and PostgreSQL: a realtime instance SIGKILLed with members on it,
 * and the sender (the registry) and Redis restarted with events queued.
 */
describe('faults: webhooks', () => {
  const suite = useFaultStack({
    redis: { persistent: true },
    serviceEnv: { PRESENCE_TTL_MS: String(PRESENCE_TTL_MS), WEBHOOK_SENDER_LEASE_MS: '1000', WEBHOOK_BATCH_WAIT_MS: '100', WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_RETRY_MAX_MS: '1000' },
  });
  let receiver: WebhookReceiver;
  let t: Tenant;
  const distinct = (pred: (e: WebhookEvent) => boolean) => {
    const seen = new Set<string>();
    return receiver.delivered<WebhookEvent>().filter((e) => pred(e) && !seen.has(e.id) && (seen.add(e.id), true));
  };

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    t = await Tenant.create(suite.stack);
    const res = await fetch(`${suite.stack.registryUrl}/admin/tenants/${t.id}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${suite.stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url, events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'user_connected', 'user_disconnected'] }),
    });
    expect(res.status).toBe(201);
  });
  afterAll(async () => {
    await receiver?.stop();
  });

  it('realtime2 SIGKILLed with members on it: their member_removed and user_disconnected arrive within the presence bound', async () => {
    const { stack } = suite;
    const user = randomUUID();
    const channel = 'presence:kill';
    const sock = await openSocket(stack.realtimeWs[1], await t.token(user));
    await subscribe(sock, `tenants/${t.id}/channels/${channel}`);
    await receiver.until(() => distinct((e) => e.user_id === user && e.type === 'member_added').length === 1, 10_000);
    const killedAt = Date.now();
    await stack.kill('realtime2');
    const gone = (e: WebhookEvent) => e.user_id === user && (e.type === 'member_removed' || e.type === 'user_disconnected');
    // The presence bound (TTL + TTL/3), plus the sender's batch wait and a round trip or two.
    const bound = PRESENCE_TTL_MS + PRESENCE_TTL_MS / 3 + 2000;
    await receiver.until(() => distinct(gone).length === 2, bound + 5000);
    const arrived = Date.now() - killedAt;
    console.log(`[faults] webhooks: member_removed and user_disconnected ${arrived} ms after the SIGKILL (bound ${bound} ms)`);
    expect(arrived).toBeLessThan(bound);
    expect(distinct((e) => e.channel === channel && e.type === 'channel_vacated')).toHaveLength(1);
  });

  it('the sender and Redis restarted with events queued and unread: every event arrives, none lost', async () => {
    const { stack } = suite;
    receiver.mode = 'fail';
    const channels = Array.from({ length: 6 }, (_, i) => `backlog-${i}`);
    const sock = await openSocket(stack.realtimeWs[0], await t.token());
    for (const ch of channels.slice(0, 3)) await subscribe(sock, `tenants/${t.id}/channels/${ch}`);
    // Queued in PostgreSQL (the receiver fails), then the sender dies.
    await receiver.until(() => receiver.requests.some((r) => r.status === 500), 10_000);
    await stack.kill('registry');
    // Events written to the stream while no sender reads it, then Redis restarts (AOF).
    for (const ch of channels.slice(3)) await subscribe(sock, `tenants/${t.id}/channels/${ch}`);
    await stack.redis.kill();
    await stack.redis.start();
    receiver.mode = 'ok';
    await stack.restart('registry');
    const occupied = (e: WebhookEvent) => e.type === 'channel_occupied' && channels.includes(e.channel ?? '');
    await receiver.until(() => distinct(occupied).length === channels.length, 20_000);
    expect(distinct(occupied).map((e) => e.channel).sort()).toEqual([...channels].sort());
    sock.close();
  });
});
