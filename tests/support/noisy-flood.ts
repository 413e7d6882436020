import { randomUUID } from 'node:crypto';
import { setPriority } from 'node:os';
import { signToken } from '@service-relay/testkit';
import { WebSocket } from 'ws';

/**
 * A noisy tenant, in a process of its own so its client work does not slow
 * the measuring test (tests/faults/tenant-limits.test.ts): for FLOOD_MS it sends
 * PUBLISH_PER_S publishes (a WebSocket on each realtime instance,
 * a tenth of them over REST through the gateway) and CONNECT_PER_S connection
 * attempts, then prints what was admitted and refused as one JSON line.
 * Bounded: it stops by itself after FLOOD_MS (at most 60 s).
 */
// A load generator stands in for clients on other machines: its own CPU work yields to the servers' on this one.
setPriority(10);

const env = (name: string) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const tenantId = env('TENANT_ID');
const secret = env('SECRET');
const wsUrls = env('WS_URLS').split(',');
const gatewayUrl = env('GATEWAY_URL');
const floodMs = Math.min(60_000, Number(env('FLOOD_MS')));
const publishPerS = Number(env('PUBLISH_PER_S'));
const connectPerS = Number(env('CONNECT_PER_S'));
const TICK_MS = 50;
const sign = () => signToken({ secret, tenantId, userId: randomUUID() });
// A client reuses its token (forged or fresh tokens per request are the gateway's refused-credential budget's concern, not this test's).
const restToken = sign();
const connectTokens = Array.from({ length: 10 }, sign);
const topic = `tenants/${tenantId}/channels/flood`;
const counts = { elapsed_ms: 0, ws_published: 0, ws_refused: 0, rest_published: 0, rest_refused: 0, connects: 0, connects_refused: 0, connects_admitted: 0 };

const openSocket = (url: string) =>
  new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${sign()}` } });
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString()) as { type: string; code?: string };
      if (f.type === 'ready') resolve(ws);
      else if (f.type === 'published') counts.ws_published++;
      else if (f.type === 'error' && f.code === 'rate_limited') counts.ws_refused++;
    });
    ws.once('error', reject);
  });
const sockets = await Promise.all([0, 1].map((i) => openSocket(wsUrls[i % wsUrls.length]!)));
const admitted: WebSocket[] = [];
const attempt = (url: string) => {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${connectTokens[counts.connects++ % connectTokens.length]}` } });
  ws.on('message', (d) => {
    if ((JSON.parse(d.toString()) as { type: string }).type === 'ready') {
      counts.connects_admitted++;
      admitted.push(ws);
    }
  });
  ws.once('close', (code) => code === 4429 && counts.connects_refused++);
  ws.once('error', () => {});
};

const perTick = (perS: number) => (perS * TICK_MS) / 1000;
let wsCredit = 0;
let restCredit = 0;
let connectCredit = 0;
const ticks = Math.ceil(floodMs / TICK_MS);
const started = performance.now();
for (let tick = 0; tick < ticks; tick++) {
  wsCredit += perTick(publishPerS * 0.9);
  restCredit += perTick(publishPerS * 0.1);
  connectCredit += perTick(connectPerS);
  for (; wsCredit >= 1; wsCredit--) sockets[tick % sockets.length]!.send(JSON.stringify({ type: 'publish', topic, data: tick }));
  for (; restCredit >= 1; restCredit--) {
    void fetch(`${gatewayUrl}/api/v1/channels/flood/messages`, { method: 'POST', headers: { authorization: `Bearer ${restToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ data: tick }) }).then(
      async (r) => {
        await r.arrayBuffer();
        if (r.status === 201) counts.rest_published++;
        else counts.rest_refused++;
      },
      () => {},
    );
  }
  for (; connectCredit >= 1; connectCredit--) attempt(wsUrls[tick % wsUrls.length]!);
  await new Promise((r) => setTimeout(r, TICK_MS));
}
// Publishes were sent for this long (at a lower priority the ticks may run late: the rate allowed is judged on it).
counts.elapsed_ms = Math.round(performance.now() - started);
// The last answers.
await new Promise((r) => setTimeout(r, 500));
for (const ws of [...sockets, ...admitted]) ws.terminate();
process.stdout.write(`${JSON.stringify(counts)}\n`);
process.exit(0);
