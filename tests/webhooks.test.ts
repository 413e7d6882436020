import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RelaySignatureError, verifyWebhook, type WebhookEvent } from '../packages/host/src/index';
import { basic, createTenantWithSecret, signWithJose, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { WebhookReceiver } from './support/webhook-receiver';
import { TestSocket } from './support/ws-client';

/**
 * Webhooks (#32) over the distributed deployment: two realtime instances on
 * Redis and PostgreSQL, the registry's sender, and a real HTTP receiver.
 * Retries are shortened (WEBHOOK_RETRY_BASE_MS 200 ms, cap 1 s) and the
 * failing spell is 3 s rather than the 30 s, to keep the file short:
 * the schedule is the same code with a smaller base.
 */
describe('webhooks across the whole stack', () => {
  let stack: Stack;
  let receiver: WebhookReceiver;
  let t: { tenant: CreatedTenant; secret: string };
  let signingSecret: string;
  const sockets: TestSocket[] = [];

  const topic = (channel: string) => `tenants/${t.tenant.tenant_id}/channels/${channel}`;
  const open = async (instance: number, userId: string) => {
    const s = await TestSocket.open(stack.realtimeWs[instance]!, await signWithJose(t.secret, t.tenant.tenant_id, userId));
    sockets.push(s);
    return s;
  };
  const subscribe = async (s: TestSocket, channel: string) => {
    const ref = randomUUID();
    s.send({ type: 'subscribe', topic: topic(channel), ref });
    expect(await s.next((f) => f.ref === ref)).toMatchObject({ type: 'subscribed' });
  };
  const unsubscribe = async (s: TestSocket, channel: string) => {
    const ref = randomUUID();
    s.send({ type: 'unsubscribe', topic: topic(channel), ref });
    expect(await s.next((f) => f.ref === ref)).toMatchObject({ type: 'unsubscribed' });
  };
  const adminCall = (method: string, path: string, body?: unknown) =>
    fetch(`${stack.registryUrl}/admin/tenants/${t.tenant.tenant_id}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.adminToken}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  /** Distinct events (a retried batch repeats its ids) of this test's channels or users. */
  const eventsOf = (pred: (e: WebhookEvent) => boolean): WebhookEvent[] => {
    const seen = new Set<string>();
    return receiver.delivered<WebhookEvent>().filter((e) => pred(e) && !seen.has(e.id) && (seen.add(e.id), true));
  };

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    stack = await startStack({ registryEnv: { WEBHOOK_BATCH_WAIT_MS: '100', WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_RETRY_MAX_MS: '1000' } });
    t = await createTenantWithSecret(stack);
    const res = await adminCall('POST', '/webhooks', {
      url: receiver.url,
      events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'user_connected', 'user_disconnected'],
    });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { signing_secret: string; endpoint_id: string; enabled: boolean };
    expect(created.enabled).toBe(true);
    expect(created.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    signingSecret = created.signing_secret;
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await stack?.stop();
    await receiver?.stop();
  });

  it('refuses plain http to a non-loopback host, and serves the host server API with the host credential only', async () => {
    const bad = await adminCall('POST', '/webhooks', { url: 'http://example.com/hook', events: ['member_added'] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errors: string[] }).errors).toEqual(['invalid_webhook']);
    const host = `${stack.gatewayUrl}/api/host/tenants/${t.tenant.tenant_id}/webhooks`;
    const listed = await fetch(host, { headers: { authorization: basic(t.tenant.host_sync_client_id, t.tenant.host_sync_client_secret) } });
    expect(listed.status).toBe(200);
    const { webhooks } = (await listed.json()) as { webhooks: Array<{ url: string; signing_secret?: string }> };
    expect(webhooks.map((w) => w.url)).toEqual([receiver.url]);
    expect(webhooks[0]!.signing_secret).toBeUndefined();
    const refused = await fetch(host, { headers: { authorization: basic(t.tenant.host_sync_client_id, 'wrong') } });
    expect(refused.status).toBe(401);
  });

  it('sends exactly the six events for users and channels spread over both instances, one channel_occupied for two first subscribers at once, signed', async () => {
    const [userA, userB] = [randomUUID(), randomUUID()];
    const channel = 'presence:lobby';
    const a1 = await open(0, userA);
    const b2 = await open(1, userB);
    // Two first subscribers at the same moment, on two instances.
    await Promise.all([subscribe(a1, channel), subscribe(b2, channel)]);
    // A second connection of A, on the other instance: no second user_connected.
    const a2 = await open(1, userA);
    for (const s of [a1, b2, a2]) s.close();
    await Promise.all([a1, b2, a2].map((s) => s.closed()));
    const ours = (e: WebhookEvent) => e.channel === channel || e.user_id === userA || e.user_id === userB;
    await receiver.until(() => eventsOf(ours).length >= 10, 15_000);
    // Nothing more comes: the sender batches within 100 ms here, so a second is plenty for a stray event to show.
    await new Promise((r) => setTimeout(r, 1000));
    const events = eventsOf(ours);
    const summary = events.map((e) => `${e.type}:${e.channel ?? '-'}:${e.user_id === userA ? 'A' : e.user_id === userB ? 'B' : '-'}`).sort();
    expect(summary).toEqual(
      [
        'user_connected:-:A',
        'user_connected:-:B',
        `channel_occupied:${channel}:-`,
        `member_added:${channel}:A`,
        `member_added:${channel}:B`,
        `member_removed:${channel}:A`,
        `member_removed:${channel}:B`,
        `channel_vacated:${channel}:-`,
        'user_disconnected:-:A',
        'user_disconnected:-:B',
      ].sort(),
    );
    const at = (type: string, user?: string) => events.findIndex((e) => e.type === type && (user === undefined || e.user_id === user));
    expect(at('channel_occupied')).toBeLessThan(at('channel_vacated'));
    for (const u of [userA, userB]) {
      expect(at('member_added', u)).toBeLessThan(at('member_removed', u));
      expect(at('user_connected', u)).toBeLessThan(at('user_disconnected', u));
    }
    for (const e of events) {
      expect(e.tenant_id).toBe(t.tenant.tenant_id);
      expect(e.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(Number.isNaN(Date.parse(e.created_at))).toBe(false);
    }
    // Every request verifies with the SDK helper; an altered body or a stale timestamp is refused.
    const accepted = receiver.requests.filter((r) => r.status === 200);
    for (const r of accepted) expect((await verifyWebhook(r.body, r.headers, signingSecret)).length).toBeGreaterThan(0);
    const one = accepted[0]!;
    await expect(verifyWebhook(one.body.replace('"type"', '"type" '), one.headers, signingSecret)).rejects.toThrow(RelaySignatureError);
    await expect(verifyWebhook(one.body, one.headers, signingSecret, { nowS: Math.floor(Date.now() / 1000) + 600 })).rejects.toMatchObject({ reason: 'stale' });
    await expect(verifyWebhook(one.body, one.headers, `whsec_${Buffer.alloc(32).toString('base64')}`)).rejects.toMatchObject({ reason: 'bad_signature' });
  });

  it('an endpoint answering 500 for a while gets every event later, in order per channel, none lost; its log shows the failures', async () => {
    receiver.mode = 'fail';
    const channels = ['c1', 'c2', 'c3'];
    const rounds = 3;
    const failingFrom = receiver.requests.length;
    const subs = [await open(0, randomUUID()), await open(1, randomUUID())];
    for (let round = 0; round < rounds; round++) {
      for (const [i, ch] of channels.entries()) {
        const s = subs[i % 2]!;
        await subscribe(s, ch);
        await unsubscribe(s, ch);
      }
    }
    // The endpoint fails for 3 s (the schedule is WEBHOOK_RETRY_BASE_MS 200 doubled up to 1 s).
    await receiver.until(() => receiver.requests.length > failingFrom, 10_000);
    await new Promise((r) => setTimeout(r, 3000));
    const log = await adminCall('GET', `/webhooks?`);
    const endpointId = ((await log.json()) as { webhooks: Array<{ endpoint_id: string; failures: number; queued_events: number }> }).webhooks[0]!;
    expect(endpointId.failures).toBeGreaterThan(0);
    expect(endpointId.queued_events).toBeGreaterThanOrEqual(channels.length * rounds * 2);
    receiver.mode = 'ok';
    const ofChannels = (e: WebhookEvent) => channels.includes(e.channel ?? '');
    await receiver.until(() => eventsOf(ofChannels).length >= channels.length * rounds * 2, 15_000);
    for (const ch of channels) {
      const seq = eventsOf((e) => e.channel === ch).map((e) => e.type);
      expect(seq).toEqual(Array.from({ length: rounds }, () => ['channel_occupied', 'channel_vacated']).flat());
    }
    // The log is written once the sender has the answer, just after the receiver sent it: read until it shows (bounded).
    type Attempt = { status: number; ok: boolean; latency_ms: number; next_attempt_at: string | null };
    let attempts: Attempt[] = [];
    for (let i = 0; i < 50 && !attempts[0]?.ok; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      const deliveries = await adminCall('GET', `/webhooks/${endpointId.endpoint_id}/deliveries?limit=100`);
      expect(deliveries.status).toBe(200);
      attempts = ((await deliveries.json()) as { attempts: Attempt[] }).attempts;
    }
    expect(attempts.some((a) => a.status === 500 && !a.ok && a.next_attempt_at !== null)).toBe(true);
    expect(attempts[0]).toMatchObject({ status: 200, ok: true, next_attempt_at: null });
  });

  it('switched off (CLI), an endpoint gets nothing; switched on, it gets what was queued meanwhile; rotation signs with both secrets during the overlap', async () => {
    const list = (await (await adminCall('GET', '/webhooks')).json()) as { webhooks: Array<{ endpoint_id: string }> };
    const id = list.webhooks[0]!.endpoint_id;
    // The admin CLI's switch (the same call as the admin API's).
    const off = await stack.admin('webhooks', 'disable', t.tenant.tenant_id, id);
    expect(off.code).toBe(0);
    expect(JSON.parse(off.stdout)).toMatchObject({ endpoint_id: id, enabled: false });
    const before = receiver.requests.length;
    const s = await open(0, randomUUID());
    await subscribe(s, 'off-switch');
    await unsubscribe(s, 'off-switch');
    // Nothing to await for "nothing sent": give the sender several of its 100 ms rounds.
    await new Promise((r) => setTimeout(r, 800));
    expect(receiver.requests.length).toBe(before);
    const rotated = await adminCall('POST', `/webhooks/${id}/secret/rotate`, { overlap_s: 60 });
    expect(rotated.status).toBe(200);
    const next = ((await rotated.json()) as { signing_secret: string }).signing_secret;
    expect(next).not.toBe(signingSecret);
    expect((await adminCall('POST', `/webhooks/${id}/enable`)).status).toBe(200);
    await receiver.until(() => eventsOf((e) => e.channel === 'off-switch').length >= 2, 10_000);
    const last = receiver.requests.filter((r) => r.status === 200).at(-1)!;
    expect((await verifyWebhook(last.body, last.headers, next)).length).toBeGreaterThan(0);
    expect((await verifyWebhook(last.body, last.headers, signingSecret)).length).toBeGreaterThan(0);
    expect(String(last.headers['webhook-signature']).split(' ')).toHaveLength(2);
  });
});
