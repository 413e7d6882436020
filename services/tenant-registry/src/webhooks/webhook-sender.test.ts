import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InProcessWebhookEvents } from '@service-relay/webhook-events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

/**
 * The sender's schedule (#32) on one registry (PGlite, events handed over in
 * process as the embedded default does): a failing endpoint is retried when
 * each retry is due, not at the next idle round (every 5 s), and what it
 * missed goes once it answers.
 */
describe('webhook sender: retries on time', () => {
  const events = new InProcessWebhookEvents();
  let reg: TestRegistry;
  let receiver: Server;
  let url: string;
  /** Arrival times and statuses of the receiver's requests on /hook; it answers 500 until `okFrom`. */
  const seen: Array<{ at: number; status: number; ids: string[] }> = [];
  let okFrom = Number.POSITIVE_INFINITY;
  /** Requests on /slow, answered 200 after 300 ms. */
  const slow: Array<{ at: number; channels: string[] }> = [];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { events: Array<{ id: string; channel: string }> };
        if (req.url === '/slow') {
          slow.push({ at: Date.now(), channels: body.events.map((e) => e.channel) });
          setTimeout(() => res.writeHead(200).end(), 300);
          return;
        }
        const status = Date.now() >= okFrom ? 200 : 500;
        seen.push({ at: Date.now(), status, ids: body.events.map((e) => e.id) });
        res.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    reg = await startTestRegistry({ webhookEvents: events, env: { WEBHOOK_BATCH_WAIT_MS: '50', WEBHOOK_RETRY_BASE_MS: '100', WEBHOOK_RETRY_MAX_MS: '200' } });
  });
  afterAll(async () => {
    await reg?.stop();
    receiver?.closeAllConnections();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  it('retries a failing endpoint at each retry (at most WEBHOOK_RETRY_MAX_MS apart, plus a round), then delivers every event once it answers', async () => {
    const tenant = ((await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string }).tenant_id;
    const created = await reg.admin('POST', `/admin/tenants/${tenant}/webhooks`, { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: `${url}/hook`, events: ['channel_occupied'] }) });
    expect(created.status).toBe(201);
    for (const channel of ['a', 'b', 'c']) events.push({ type: 'channel_occupied', tenantId: tenant, channel, ms: Date.now() });
    const deadline = Date.now() + 15_000;
    const until = async (done: () => boolean) => {
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`not in time: ${JSON.stringify(seen.map((s) => s.status))}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await until(() => seen.length > 0);
    okFrom = seen[0]!.at + 2000;
    await until(() => seen.some((s) => s.status === 200));
    const failed = seen.filter((s) => s.status === 500);
    const gaps = seen.slice(1).map((s, i) => s.at - seen[i]!.at);
    // Retries 50..200 ms apart (jittered), each looked at on the sender's next 100 ms round: ~8 in the 2 s.
    expect(failed.length).toBeGreaterThanOrEqual(5);
    expect(Math.max(...gaps)).toBeLessThan(1500);
    // The one batch, with the same ids every time.
    for (const s of seen) expect(s.ids).toEqual(seen[0]!.ids);
    expect(seen[0]!.ids).toHaveLength(3);
  });

  it('what is stored while a request to the endpoint is in flight goes right after it; a full batch is followed by the rest at once', async () => {
    const tenant = ((await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string }).tenant_id;
    const created = await reg.admin('POST', `/admin/tenants/${tenant}/webhooks`, { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: `${url}/slow`, events: ['channel_vacated'] }) });
    expect(created.status).toBe(201);
    const push = (channel: string) => events.push({ type: 'channel_vacated', tenantId: tenant, channel, ms: Date.now() });
    const until = async (done: () => boolean) => {
      const deadline = Date.now() + 10_000;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`not in time: ${JSON.stringify(slow)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    push('first');
    await until(() => slow.length === 1);
    // Stored while that request waits for its answer.
    push('meanwhile');
    await until(() => slow.length === 2);
    expect(slow[1]!.channels).toEqual(['meanwhile']);
    // Well before the 5 s idle round: the answer (300 ms) plus a batch wait and a round or two.
    expect(slow[1]!.at - slow[0]!.at).toBeLessThan(2500);
    // 150 at once: a full batch of 100 (WEBHOOK_BATCH_MAX), then the other 50 without waiting for a round.
    for (let i = 0; i < 150; i++) push(`n${i}`);
    await until(() => slow.length === 4);
    expect(slow.slice(2).map((r) => r.channels.length)).toEqual([100, 50]);
    expect(slow[3]!.at - slow[2]!.at).toBeLessThan(2500);
  });
});
