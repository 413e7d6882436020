import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RelaySignatureError, verifyWebhook, type WebhookEvent } from '../packages/host/src/index';
import { basic, createTenantWithSecret, fetchSecret, signWithJose, type CreatedTenant } from './support/host';
import { embeddedEnv, ManagedProcess, runCommand } from './support/processes';
import { startStack, type Stack } from './support/stack';
import { WebhookReceiver } from './support/webhook-receiver';
import { TestSocket } from './support/ws-client';

const ALL_EVENTS = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'user_connected', 'user_disconnected'];
/** The failing spell: the receiver answers 500 for this long, then 200. */
const FAILING_MS = 30_000;

/**
 * Webhooks (#32) over the distributed deployment: two realtime instances on
 * Redis and PostgreSQL, the registry's sender, and real HTTP receivers.
 * Retries are shortened (WEBHOOK_RETRY_BASE_MS 200 ms, cap 1 s). Each test
 * has its own tenant and receiver and they run concurrently, so the 30 s
 * failing spell overlaps the other tests instead of following them; the
 * last one runs the embedded default (`npm start`, the in-process bus) in
 * that window too.
 *
 * Realtime records a tenant's events only while an enabled endpoint wants
 * them; the registry counts an event it stored for no endpoint as
 * `unrouted`. Every test here keeps that count at zero (its endpoints want
 * all six, and the switch is thrown only once what was recorded is stored),
 * so a test that finds it above zero found an event recorded for nobody.
 */
describe.concurrent('webhooks across the whole stack', () => {
  let stack: Stack;
  const receivers: WebhookReceiver[] = [];
  const sockets: TestSocket[] = [];
  /** The embedded default's `npm start` (the last test's), and its data directory. */
  const embedded: ManagedProcess[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-embedded-webhooks-'));

  /** A tenant of its own, with (unless `endpoint` is false) an endpoint wanting all six events at a receiver of its own. */
  const hooked = async (endpoint = true) => {
    const t = await createTenantWithSecret(stack);
    const receiver = await WebhookReceiver.start();
    receivers.push(receiver);
    const adminCall = (method: string, path: string, body?: unknown) =>
      fetch(`${stack.registryUrl}/admin/tenants/${t.tenant.tenant_id}${path}`, {
        method,
        headers: { authorization: `Bearer ${stack.adminToken}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    const addEndpoint = async () => {
      const res = await adminCall('POST', '/webhooks', { url: receiver.url, events: ALL_EVENTS });
      expect(res.status).toBe(201);
      const created = (await res.json()) as { signing_secret: string; endpoint_id: string; enabled: boolean };
      expect(created.enabled).toBe(true);
      expect(created.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      return created;
    };
    const created = endpoint ? await addEndpoint() : undefined;
    const topic = (channel: string) => `tenants/${t.tenant.tenant_id}/channels/${channel}`;
    return {
      ...t,
      receiver,
      adminCall,
      addEndpoint,
      endpointId: created?.endpoint_id ?? '',
      signingSecret: created?.signing_secret ?? '',
      open: async (instance: number, userId: string) => {
        const s = await TestSocket.open(stack.realtimeWs[instance]!, await signWithJose(t.secret, t.tenant.tenant_id, userId));
        sockets.push(s);
        return s;
      },
      subscribe: async (s: TestSocket, channel: string) => {
        const ref = randomUUID();
        s.send({ type: 'subscribe', topic: topic(channel), ref });
        expect(await s.next((f) => f.ref === ref)).toMatchObject({ type: 'subscribed' });
      },
      unsubscribe: async (s: TestSocket, channel: string) => {
        const ref = randomUUID();
        s.send({ type: 'unsubscribe', topic: topic(channel), ref });
        expect(await s.next((f) => f.ref === ref)).toMatchObject({ type: 'unsubscribed' });
      },
      /** Distinct events (a retried batch repeats its ids) delivered to this tenant's receiver. */
      events: (pred: (e: WebhookEvent) => boolean = () => true): WebhookEvent[] => {
        const seen = new Set<string>();
        return receiver.delivered<WebhookEvent>().filter((e) => pred(e) && !seen.has(e.id) && (seen.add(e.id), true));
      },
    };
  };
  type Hooked = Awaited<ReturnType<typeof hooked>>;
  const summary = (events: WebhookEvent[], names: Record<string, string>) => events.map((e) => `${e.type}:${e.channel ?? '-'}:${e.user_id === undefined ? '-' : (names[e.user_id] ?? '?')}`).sort();
  const closeAll = async (...socks: TestSocket[]) => {
    for (const s of socks) s.close();
    await Promise.all(socks.map((s) => s.closed()));
  };
  /** Events the sender stored for no endpoint (relay_registry_webhook_events_total{result="unrouted"}). */
  const unrouted = async () => {
    // The registry's ops listener (the admin port answers /metrics 404).
    const res = await fetch(stack.health.registry!.replace('/healthz', '/metrics'));
    expect(res.status).toBe(200);
    const text = await res.text();
    // Read where the counter lives: events were delivered (by the calling test) before it asks.
    expect(text).toMatch(/^relay_registry_webhook_events_total\{result="delivered"[^}]*\} [1-9]/m);
    return Number(/^relay_registry_webhook_events_total\{result="unrouted"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
  };
  /** The endpoint's view, read until `done` holds (the sender stores and answers a moment after the receiver; bounded). */
  const endpointUntil = async (h: Hooked, done: (e: { failures: number; queued_events: number; enabled: boolean }) => boolean) => {
    let view: { failures: number; queued_events: number; enabled: boolean } | undefined;
    for (let i = 0; i < 100 && !(view && done(view)); i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      const res = await h.adminCall('GET', `/webhooks/${h.endpointId}`);
      expect(res.status).toBe(200);
      view = (await res.json()) as typeof view;
    }
    expect(view && done(view)).toBe(true);
    return view!;
  };

  beforeAll(async () => {
    stack = await startStack({ registryEnv: { WEBHOOK_BATCH_WAIT_MS: '100', WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_RETRY_MAX_MS: '1000' } });
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await Promise.all([stack?.stop(), ...embedded.map((p) => p.stop('SIGINT'))]);
    await Promise.all(receivers.map((r) => r.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses plain http to a non-loopback host, and serves the host server API with the host credential only', async () => {
    const h = await hooked(false);
    const bad = await h.adminCall('POST', '/webhooks', { url: 'http://example.com/hook', events: ['member_added'] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errors: string[] }).errors).toEqual(['invalid_webhook']);
    const host = `${stack.gatewayUrl}/api/host/tenants/${h.tenant.tenant_id}/webhooks`;
    const auth = { authorization: basic(h.tenant.host_sync_client_id, h.tenant.host_sync_client_secret) };
    // The host creates its own endpoint (answered once every instance records its events).
    const created = await fetch(host, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ url: h.receiver.url, events: ['member_added'] }) });
    expect(created.status).toBe(201);
    expect(((await created.json()) as { signing_secret: string }).signing_secret).toMatch(/^whsec_/);
    const listed = await fetch(host, { headers: auth });
    expect(listed.status).toBe(200);
    const { webhooks } = (await listed.json()) as { webhooks: Array<{ url: string; events: string[]; signing_secret?: string }> };
    expect(webhooks.map((w) => [w.url, w.events])).toEqual([[h.receiver.url, ['member_added']]]);
    expect(webhooks[0]!.signing_secret).toBeUndefined();
    const refused = await fetch(host, { headers: { authorization: basic(h.tenant.host_sync_client_id, 'wrong') } });
    expect(refused.status).toBe(401);
  });

  it('sends exactly the six events for users and channels spread over both instances, one channel_occupied for two first subscribers at once, signed', async () => {
    const h = await hooked();
    const [userA, userB] = [randomUUID(), randomUUID()];
    const channel = 'presence:lobby';
    const a1 = await h.open(0, userA);
    const b2 = await h.open(1, userB);
    // Two first subscribers at the same moment, on two instances.
    await Promise.all([h.subscribe(a1, channel), h.subscribe(b2, channel)]);
    // A second connection of A, on the other instance: no second user_connected.
    const a2 = await h.open(1, userA);
    await closeAll(a1, b2, a2);
    await h.receiver.until(() => h.events().length >= 10, 15_000);
    // Nothing more comes: the sender batches within 100 ms here, so a second is plenty for a stray event to show.
    await new Promise((r) => setTimeout(r, 1000));
    const events = h.events();
    expect(summary(events, { [userA]: 'A', [userB]: 'B' })).toEqual(
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
      expect(e.tenant_id).toBe(h.tenant.tenant_id);
      expect(e.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(Number.isNaN(Date.parse(e.created_at))).toBe(false);
    }
    // Every request verifies with the SDK helper; an altered body or a stale timestamp is refused.
    const accepted = h.receiver.requests.filter((r) => r.status === 200);
    for (const r of accepted) expect((await verifyWebhook(r.body, r.headers, h.signingSecret)).length).toBeGreaterThan(0);
    const one = accepted[0]!;
    await expect(verifyWebhook(one.body.replace('"type"', '"type" '), one.headers, h.signingSecret)).rejects.toThrow(RelaySignatureError);
    await expect(verifyWebhook(one.body, one.headers, h.signingSecret, { nowS: Math.floor(Date.now() / 1000) + 600 })).rejects.toMatchObject({ reason: 'stale' });
    await expect(verifyWebhook(one.body, one.headers, `whsec_${Buffer.alloc(32).toString('base64')}`)).rejects.toMatchObject({ reason: 'bad_signature' });
  });

  it('an endpoint answering 500 for 30 s, then 200, gets every event, in order per channel, no id lost; its log shows the 500s and the next retry', async () => {
    const h = await hooked();
    h.receiver.mode = 'fail';
    const channels = ['c1', 'c2', 'c3'];
    const subs = [await h.open(0, randomUUID()), await h.open(1, randomUUID())];
    const round = async () => {
      for (const [i, ch] of channels.entries()) {
        const s = subs[i % 2]!;
        await h.subscribe(s, ch);
        await h.unsubscribe(s, ch);
      }
    };
    for (let r = 0; r < 3; r++) await round();
    await h.receiver.until(() => h.receiver.requests.some((r) => r.status === 500), 10_000);
    const failingSince = Date.now();
    // Events recorded while the endpoint fails are kept too.
    await round();
    const rounds = 4;
    // Midway: the endpoint is failing, everything waits in its queue, and its log says when it is tried next.
    const midway = await endpointUntil(h, (e) => e.failures > 0 && e.queued_events >= channels.length * rounds * 2);
    expect(midway.enabled).toBe(true);
    type Attempt = { status: number | null; ok: boolean; latency_ms: number; next_attempt_at: string | null };
    const log = async () => {
      const res = await h.adminCall('GET', `/webhooks/${h.endpointId}/deliveries?limit=100`);
      expect(res.status).toBe(200);
      return ((await res.json()) as { attempts: Attempt[] }).attempts;
    };
    const failing = await log();
    expect(failing[0]).toMatchObject({ status: 500, ok: false, next_attempt_at: expect.any(String) });
    await new Promise((r) => setTimeout(r, failingSince + FAILING_MS - Date.now()));
    h.receiver.mode = 'ok';
    const ofChannels = (e: WebhookEvent) => channels.includes(e.channel ?? '');
    await h.receiver.until(() => h.events(ofChannels).length >= channels.length * rounds * 2, 15_000);
    // The spell lasted the 30 s and was retried all along (WEBHOOK_RETRY_MAX_MS 1 s; the bound leaves room for a loaded
    // machine: the schedule itself is webhook-sender.test.ts's).
    const failed = h.receiver.requests.filter((r) => r.status === 500);
    expect(failed.at(-1)!.at - failed[0]!.at).toBeGreaterThanOrEqual(FAILING_MS - 2500);
    expect(Math.max(...failed.slice(1).map((r, i) => r.at - failed[i]!.at))).toBeLessThan(10_000);
    // Every event, each channel's in order.
    for (const ch of channels) {
      expect(h.events((e) => e.channel === ch).map((e) => e.type)).toEqual(Array.from({ length: rounds }, () => ['channel_occupied', 'channel_vacated']).flat());
    }
    // No id lost: every event id ever offered (in a failed request) is among those delivered, and none is new.
    const ids = (bodies: string[]) => new Set(bodies.flatMap((b) => (JSON.parse(b) as { events: WebhookEvent[] }).events.filter(ofChannels).map((e) => e.id)));
    const offered = ids(failed.map((r) => r.body));
    const delivered = ids(h.receiver.requests.filter((r) => r.status === 200).map((r) => r.body));
    expect([...offered].filter((id) => !delivered.has(id))).toEqual([]);
    expect(delivered.size).toBe(channels.length * rounds * 2);
    // The log is written once the sender has the answer, just after the receiver sent it: read until it shows (bounded).
    let attempts: Attempt[] = [];
    for (let i = 0; i < 50 && !attempts[0]?.ok; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      attempts = await log();
    }
    expect(attempts[0]).toMatchObject({ status: 200, ok: true, next_attempt_at: null });
    // Every failed request is in the log (it keeps 100; retries at least 500 ms apart make at most ~60 here), each with its next retry.
    expect(failed.length).toBeLessThan(90);
    expect(attempts.filter((a) => a.status === 500 && !a.ok && a.next_attempt_at !== null)).toHaveLength(failed.length);
    await closeAll(...subs);
  });

  it('switched off (CLI), an endpoint is sent nothing and its tenant records nothing; switched on, it gets what was queued before; rotation signs with both secrets during the overlap', async () => {
    const h = await hooked();
    const user = randomUUID();
    h.receiver.mode = 'fail';
    const s = await h.open(0, user);
    await h.subscribe(s, 'before');
    await h.unsubscribe(s, 'before');
    // user_connected and the channel's two events are stored (and failing) before the switch.
    await endpointUntil(h, (e) => e.failures > 0 && e.queued_events === 3);
    // The admin CLI's switch (the same call as the admin API's), in force on every instance at its answer.
    const off = await stack.admin('webhooks', 'disable', h.tenant.tenant_id, h.endpointId);
    expect(off.code).toBe(0);
    expect(JSON.parse(off.stdout)).toMatchObject({ endpoint_id: h.endpointId, enabled: false, queued_events: 3 });
    const sentBefore = h.receiver.requests.length;
    await h.subscribe(s, 'while-off');
    await h.unsubscribe(s, 'while-off');
    const rotated = await h.adminCall('POST', `/webhooks/${h.endpointId}/secret/rotate`, { overlap_s: 60 });
    expect(rotated.status).toBe(200);
    const next = ((await rotated.json()) as { signing_secret: string }).signing_secret;
    expect(next).not.toBe(h.signingSecret);
    // Nothing to await for "nothing sent": give the sender several of its 100 ms rounds (and a retry's 1 s).
    await new Promise((r) => setTimeout(r, 1500));
    expect(h.receiver.requests.length).toBe(sentBefore);
    h.receiver.mode = 'ok';
    expect((await h.adminCall('POST', `/webhooks/${h.endpointId}/enable`)).status).toBe(200);
    await h.subscribe(s, 'after');
    await h.unsubscribe(s, 'after');
    await h.receiver.until(() => h.events((e) => e.channel === 'after').length === 2, 10_000);
    // What was queued before the switch came; what happened while it was off was never recorded.
    expect(summary(h.events(), { [user]: 'U' })).toEqual(['user_connected:-:U', 'channel_occupied:before:-', 'channel_vacated:before:-', 'channel_occupied:after:-', 'channel_vacated:after:-'].sort());
    expect(await unrouted()).toBe(0);
    const last = h.receiver.requests.filter((r) => r.status === 200).at(-1)!;
    expect((await verifyWebhook(last.body, last.headers, next)).length).toBeGreaterThan(0);
    expect((await verifyWebhook(last.body, last.headers, h.signingSecret)).length).toBeGreaterThan(0);
    expect(String(last.headers['webhook-signature']).split(' ')).toHaveLength(2);
    await closeAll(s);
  });

  it('an endpoint added while users are connected on both instances gets what happens from its answer on (a vacated, no occupied); a tenant without endpoints records nothing', async () => {
    const none = await hooked(false);
    const h = await hooked(false);
    const [n1, n2, a, b, c] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const room = 'presence:room';
    // The tenant without endpoints: users on both instances, a presence channel, every transition.
    const ns = [await none.open(0, n1), await none.open(1, n2)];
    await Promise.all(ns.map((s) => none.subscribe(s, room)));
    await Promise.all(ns.map((s) => none.unsubscribe(s, room)));
    await closeAll(...ns);
    // A and B are connected and members of the room, one on each instance, before the endpoint exists.
    const sa = await h.open(0, a);
    const sb = await h.open(1, b);
    await h.subscribe(sa, room);
    await h.subscribe(sb, room);
    await h.addEndpoint();
    // From the 201 on: C comes and goes on instance 2, everyone leaves the room and disconnects.
    const sc = await h.open(1, c);
    await h.subscribe(sc, room);
    for (const s of [sa, sb, sc]) await h.unsubscribe(s, room);
    await closeAll(sa, sb, sc);
    const names = { [a]: 'A', [b]: 'B', [c]: 'C' };
    await h.receiver.until(() => h.events((e) => e.type === 'user_disconnected').length === 3, 15_000);
    // Nothing more comes (the sender batches within 100 ms here).
    await new Promise((r) => setTimeout(r, 1000));
    expect(summary(h.events(), names)).toEqual(
      [
        'user_connected:-:C',
        `member_added:${room}:C`,
        `member_removed:${room}:A`,
        `member_removed:${room}:B`,
        `member_removed:${room}:C`,
        `channel_vacated:${room}:-`,
        'user_disconnected:-:A',
        'user_disconnected:-:B',
        'user_disconnected:-:C',
      ].sort(),
    );
    // Everything the first tenant did, and the second before its endpoint, went to the stream before these: none of it was recorded.
    expect(await unrouted()).toBe(0);
  });

  // The same on the embedded default (`npm start` without DATABASE_URL and REDIS_URL: realtime hands events to the
  // registry's sender in the same process, in-process presence), run inside this file's 30 s failing spell.
  it('on the embedded default too: an endpoint added while a user is in a channel gets what happens from its answer on; a tenant without endpoints records nothing', async () => {
    const env: Record<string, string> = { ...(await embeddedEnv(dataDir)), WEBHOOK_BATCH_WAIT_MS: '100' };
    env.VERIFIER_ADDR = `127.0.0.1:${env.VERIFIER_GRPC_PORT}`;
    env.REALTIME_URL = `http://127.0.0.1:${env.REALTIME_PORT}`;
    const receiver = await WebhookReceiver.start();
    receivers.push(receiver);
    const proc = new ManagedProcess('npm start', 'npm', ['start'], env);
    embedded.push(proc);
    proc.start();
    await proc.waitForOutput('service-relay is running', 60_000);
    const gateway = `http://127.0.0.1:${env.GATEWAY_PORT}`;
    const cli = (...args: string[]) => runCommand('npm', ['run', '--silent', 'admin', '--', ...args], { DATA_DIR: dataDir, REGISTRY_URL: env.REGISTRY_URL! });
    const tenant = async () => {
      const created = await cli('create-tenant');
      expect(created.code, created.stderr).toBe(0);
      const t = JSON.parse(created.stdout) as CreatedTenant;
      const secret = ((await (await fetchSecret(gateway, t.tenant_id, t.host_sync_client_id, t.host_sync_client_secret)).json()) as { jwt_secret_primary: string }).jwt_secret_primary;
      return { t, open: async (user: string) => TestSocket.open(`ws://127.0.0.1:${env.GATEWAY_PORT}/ws`, await signWithJose(secret, t.tenant_id, user), true) };
    };
    const request = async (s: TestSocket, type: 'subscribe' | 'unsubscribe', t: CreatedTenant, channel: string) => {
      const ref = randomUUID();
      s.send({ type, topic: `tenants/${t.tenant_id}/channels/${channel}`, ref });
      expect(await s.next((f) => f.ref === ref)).toMatchObject({ type: `${type}d` });
    };
    const room = 'presence:room';
    const [none, w] = [await tenant(), await tenant()];
    const [n, a, b] = [randomUUID(), randomUUID(), randomUUID()];

    // The tenant without endpoints: connect, join, leave, disconnect.
    const sn = await none.open(n);
    await request(sn, 'subscribe', none.t, room);
    await request(sn, 'unsubscribe', none.t, room);
    sn.close();
    await sn.closed();
    // A is in the room before the endpoint exists.
    const sa = await w.open(a);
    await request(sa, 'subscribe', w.t, room);
    // The CLI creates the endpoint; its answer means realtime records the tenant's events from now on.
    const created = await cli('webhooks', 'create', w.t.tenant_id, '--url', receiver.url, '--events', 'channel_occupied,channel_vacated,member_added,member_removed,user_connected,user_disconnected');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ enabled: true, signing_secret: expect.stringMatching(/^whsec_/) });
    const sb = await w.open(b);
    await request(sb, 'subscribe', w.t, room);
    await request(sa, 'unsubscribe', w.t, room);
    await request(sb, 'unsubscribe', w.t, room);
    for (const s of [sa, sb]) s.close();
    await Promise.all([sa, sb].map((s) => s.closed()));
    const names: Record<string, string> = { [a]: 'A', [b]: 'B' };
    const events = () => {
      const seen = new Set<string>();
      return receiver.delivered<WebhookEvent>().filter((e) => !seen.has(e.id) && (seen.add(e.id), true));
    };
    await receiver.until(() => events().filter((e) => e.type === 'user_disconnected').length === 2, 15_000);
    // Nothing more comes (the sender batches within 100 ms here).
    await new Promise((r) => setTimeout(r, 1000));
    expect(events().map((e) => `${e.type}:${e.channel ?? '-'}:${e.user_id === undefined ? '-' : (names[e.user_id] ?? '?')}`).sort()).toEqual(
      ['user_connected:-:B', `member_added:${room}:B`, `member_removed:${room}:A`, `member_removed:${room}:B`, `channel_vacated:${room}:-`, 'user_disconnected:-:A', 'user_disconnected:-:B'].sort(),
    );
    expect(events().every((e) => e.tenant_id === w.t.tenant_id)).toBe(true);
    // The in-process queue is in order: the first tenant's transitions, and the second's before its endpoint,
    // reached the sender before these. None was recorded (the sender counts what no endpoint wanted as unrouted).
    const res = await fetch(`http://127.0.0.1:${env.REGISTRY_OPS_PORT}/metrics`);
    expect(res.status).toBe(200);
    const metrics = await res.text();
    expect(metrics).toMatch(/^relay_registry_webhook_events_total\{result="delivered"[^}]*\} [1-9]/m);
    expect(metrics).not.toMatch(/^relay_registry_webhook_events_total\{result="unrouted"[^}]*\} [1-9]/m);
  }, 120_000);
});
