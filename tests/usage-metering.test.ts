import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createTenantWithSecret, signWithJose, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

interface Counts {
  published: { rest: number; ws: number; host: number; total: number };
  deliveries: number;
  bytes_in: number;
  bytes_out: number;
  peak_connections: number;
  connection_minutes: number;
  refusals: Record<string, number>;
}

/**
 * Usage metering (#30 item 3) over the distributed deployment: two realtime
 * instances on Redis and PostgreSQL. realtime1 flushes every second;
 * realtime2 would flush once an hour, so what it counted reaches the registry
 * only through the final flush of its SIGTERM.
 */
describe('usage metering across the whole stack', () => {
  let stack: Stack;
  let a: { tenant: CreatedTenant; secret: string };
  let b: { tenant: CreatedTenant; secret: string };
  const sockets: TestSocket[] = [];
  const sent = { rest: 0, ws: 0, host: 0, bytesIn: 0 };
  let bytesOut = 0;
  let delivered = 0;
  const startedAt = Date.now();

  const topic = (tenantId: string, channel: string) => `tenants/${tenantId}/channels/${channel}`;
  const open = async (instance: number, tenant: { tenant: CreatedTenant; secret: string }) => {
    const s = await TestSocket.open(stack.realtimeWs[instance]!, await signWithJose(tenant.secret, tenant.tenant.tenant_id, randomUUID()));
    sockets.push(s);
    // Exactly the bytes of the message frames this client received.
    s.ws.on('message', (data: Buffer) => {
      if (data.toString('utf8', 0, 17) === '{"type":"message"') {
        bytesOut += data.length;
        delivered += 1;
      }
    });
    return s;
  };
  const subscribe = async (s: TestSocket, tenantId: string, channel: string) => {
    s.send({ type: 'subscribe', topic: topic(tenantId, channel), ref: channel });
    return s.next((f) => f.ref === channel);
  };
  const usageOf = async (tenantId: string, granularity = 'hour'): Promise<{ totals: Counts; buckets: Array<Counts & { start: string }> }> => {
    const res = await fetch(`${stack.registryUrl}/admin/tenants/${tenantId}/usage?granularity=${granularity}&from=${new Date(startedAt - 3_600_000).toISOString()}`, {
      headers: { authorization: `Bearer ${stack.adminToken}` },
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { totals: Counts; buckets: Array<Counts & { start: string }> };
  };
  /** Polls the admin API (the flush is on a timer: there is no event to await) until `done`, for at most 15 s. */
  const usageUntil = async (tenantId: string, done: (t: Counts) => boolean): Promise<Counts> => {
    const deadline = Date.now() + 15_000;
    for (let i = 0; i < 300; i++) {
      const { totals } = await usageOf(tenantId);
      if (done(totals) || Date.now() > deadline) return totals;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('unreachable');
  };
  /**
   * Polls until the totals stop changing across more than one flush interval of
   * realtime1 (1 s): a connection's last time reaches the registry at the flush
   * after its close, so `connection_minutes` can still grow after every count is in.
   */
  const usageSettled = async (tenantId: string): Promise<Counts> => {
    const deadline = Date.now() + 15_000;
    let last = (await usageOf(tenantId)).totals;
    for (let i = 0; i < 10 && Date.now() < deadline; i++) {
      await new Promise((r) => setTimeout(r, 1_500));
      const now = (await usageOf(tenantId)).totals;
      if (JSON.stringify(now) === JSON.stringify(last)) return now;
      last = now;
    }
    throw new Error(`tenant ${tenantId}'s usage still changing after 15 s`);
  };
  const rest = async (tenant: { tenant: CreatedTenant; secret: string }, data: unknown) => {
    const res = await fetch(`${stack.gatewayUrl}/api/v1/channels/lobby/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await signWithJose(tenant.secret, tenant.tenant.tenant_id, randomUUID())}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data }),
    });
    expect(res.status).toBe(201);
    if (tenant === a) {
      sent.rest += 1;
      sent.bytesIn += Buffer.byteLength(JSON.stringify(data));
    }
  };

  beforeAll(async () => {
    stack = await startStack({
      gatewayEnv: { USAGE_FLUSH_INTERVAL_S: '1' },
      realtimeEnv: [
        { USAGE_FLUSH_INTERVAL_S: '1', MAX_SUBSCRIPTIONS: '2' },
        { USAGE_FLUSH_INTERVAL_S: '3600', MAX_SUBSCRIPTIONS: '2' },
      ],
    });
    a = await createTenantWithSecret(stack);
    b = await createTenantWithSecret(stack);
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await stack?.stop();
  });

  it('counts REST, WebSocket and host publishes, deliveries, bytes, refusals and connections exactly, across a SIGTERM of one instance', async () => {
    const A = a.tenant.tenant_id;
    const s1 = await open(0, a);
    const s2 = await open(1, a);
    const pub = await open(1, a);
    for (const s of [s1, s2]) expect(await subscribe(s, A, 'lobby')).toMatchObject({ type: 'subscribed' });
    // MAX_SUBSCRIPTIONS=2: the third is refused on either instance.
    for (const s of [s1, s2]) {
      expect(await subscribe(s, A, 'other')).toMatchObject({ type: 'subscribed' });
      expect(await subscribe(s, A, 'third')).toMatchObject({ type: 'error', code: 'too_many_subscriptions' });
    }
    for (let i = 0; i < 5; i++) {
      const data = { n: i, text: 'héllo wörld'.repeat(i + 1) };
      pub.send({ type: 'publish', topic: topic(A, 'lobby'), data, ref: `p${i}` });
      expect(await pub.next((f) => f.ref === `p${i}`)).toMatchObject({ type: 'published' });
      sent.ws += 1;
      sent.bytesIn += Buffer.byteLength(JSON.stringify(data));
    }
    for (let i = 0; i < 4; i++) await rest(a, { rest: i, pad: 'x'.repeat(100 * i) });
    for (let i = 0; i < 3; i++) {
      const data = { host: i };
      const res = await fetch(`${stack.gatewayUrl}/api/host/tenants/${A}/messages`, {
        method: 'POST',
        headers: { authorization: basic(a.tenant.host_sync_client_id, a.tenant.host_sync_client_secret), 'content-type': 'application/json' },
        body: JSON.stringify({ channels: ['lobby'], data }),
      });
      expect(res.status).toBe(201);
      sent.host += 1;
      sent.bytesIn += Buffer.byteLength(JSON.stringify(data));
    }
    await rest(b, { other: 'tenant' });
    // A body over the limit without a declared length: refused by the gateway after the token, counted there.
    const big = new TextEncoder().encode(JSON.stringify({ data: 'x'.repeat(70_000) }));
    const refused = await fetch(`${stack.gatewayUrl}/api/v1/channels/lobby/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await signWithJose(a.secret, A, randomUUID())}`, 'content-type': 'application/json' },
      body: new ReadableStream({
        start(c) {
          c.enqueue(big);
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(refused.status).toBe(413);
    const total = sent.rest + sent.ws + sent.host;
    for (const s of [s1, s2]) for (let i = 0; i < total; i++) await s.next((f) => f.type === 'message' && f.topic === topic(A, 'lobby'));
    expect(delivered).toBe(2 * total);

    // realtime1's counts arrive within its second; realtime2's (WebSocket and host publishes) not yet.
    const before = await usageUntil(A, (t) => t.published.rest === sent.rest && t.deliveries === total && t.refusals.payload_size === 1);
    expect(before.published).toEqual({ rest: sent.rest, ws: 0, host: 0, total: sent.rest });
    expect(before.refusals).toEqual({ subscriptions: 1, payload_size: 1 });

    // SIGTERM: realtime2 closes its connections (1001) and hands over its last counts before it exits.
    const closed = [s2.closed(10_000), pub.closed(10_000)];
    expect(await stack.processes.realtime2!.stop('SIGTERM')).toBe(0);
    expect(await Promise.all(closed)).toEqual([1001, 1001]);
    s1.close();
    await s1.closed();
    const elapsedMs = Date.now() - startedAt;

    const t = await usageUntil(A, (x) => x.published.ws === sent.ws && x.peak_connections === 3 && x.connection_minutes > 0 && x.deliveries === 2 * total);
    expect(t.published).toEqual({ rest: sent.rest, ws: sent.ws, host: sent.host, total });
    expect(t.deliveries).toBe(2 * total);
    // Bytes: data as published (JSON, UTF-8) in; message frames as delivered (before WebSocket framing) out.
    expect(t.bytes_in).toBe(sent.bytesIn);
    expect(t.bytes_out).toBe(bytesOut);
    expect(t.refusals).toEqual({ subscriptions: 2, payload_size: 1 });
    // One on realtime1 plus two on realtime2, open together.
    expect(t.peak_connections).toBe(3);
    expect(t.connection_minutes).toBeGreaterThan(0);
    expect(t.connection_minutes).toBeLessThanOrEqual((3 * elapsedMs) / 60_000);
    expect(stack.processes.realtime2!.logs).not.toContain('final flush failed');

    // The same by day once every connection's last time is in, and tenant b apart.
    const settled = await usageSettled(A);
    expect({ ...settled, connection_minutes: 0 }).toEqual({ ...t, connection_minutes: 0 });
    expect(settled.connection_minutes).toBeLessThanOrEqual((3 * (Date.now() - startedAt)) / 60_000);
    expect((await usageOf(A, 'day')).totals).toEqual(settled);
    const other = await usageUntil(b.tenant.tenant_id, (x) => x.published.rest === 1);
    expect(other).toMatchObject({ published: { rest: 1, ws: 0, host: 0, total: 1 }, deliveries: 0, bytes_in: Buffer.byteLength('{"other":"tenant"}') });
  });

  it('every tenant at once, sorted and paged; the CLI prints a table and CSV; bad queries are 400 invalid_query', async () => {
    const A = a.tenant.tenant_id;
    const B = b.tenant.tenant_id;
    const from = new Date(startedAt - 3_600_000).toISOString();
    const get = (q: string) => fetch(`${stack.registryUrl}/admin/usage?${q}`, { headers: { authorization: `Bearer ${stack.adminToken}` } });
    const first = (await (await get(`from=${from}&sort=published&limit=1`)).json()) as { tenants: Array<{ tenant_id: string }>; next_cursor: string };
    expect(first.tenants.map((x) => x.tenant_id)).toEqual([A]);
    const second = (await (await get(`from=${from}&sort=published&limit=1&cursor=${first.next_cursor}`)).json()) as { tenants: Array<{ tenant_id: string }>; next_cursor: null };
    expect(second).toMatchObject({ tenants: [{ tenant_id: B }], next_cursor: null });
    for (const q of ['granularity=week', 'from=yesterday', `from=${new Date().toISOString()}&to=${from}`, 'sort=name', 'cursor=!!']) {
      const res = await get(q);
      expect(res.status, q).toBe(400);
      expect(((await res.json()) as { errors: string[] }).errors).toEqual(['invalid_query']);
    }

    const csv = await stack.admin('usage', A, '--from', from, '--format', 'csv');
    expect(csv.code, csv.stderr).toBe(0);
    const lines = csv.stdout.trim().split('\n');
    expect(lines[0]).toBe('tenant_id,start,published_rest,published_ws,published_host,deliveries,bytes_in,bytes_out,peak_connections,connection_minutes,refusals');
    const sum = (col: number) => lines.slice(1).reduce((n, l) => n + Number(l.split(',')[col]), 0);
    expect([sum(2), sum(3), sum(4)]).toEqual([sent.rest, sent.ws, sent.host]);
    const table = await stack.admin('usage', '--from', from, '--sort', 'published');
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.indexOf(A)).toBeLessThan(table.stdout.indexOf(B));
    expect(table.stdout.indexOf(A)).toBeGreaterThan(0);
  });
});
