import { performance } from 'node:perf_hooks';
import { skipRepeatedWsEnds } from '@service-relay/core';
import WebSocket from 'ws';
import { serveWorker } from '../lib/worker-runtime';
import { signToken, type TenantKey } from '../lib/tokens';
import { PROTOCOLS } from '../lib/ws-protocols';

/**
 * Clients of the instance-scale scenario: many subscribers of the contract
 * protocol from one loopback source address, each a distinct user of one of
 * two tenants, that parse each delivered message for its send time (the
 * publisher's clock: same machine, `performance.timeOrigin + now()`), or
 * the publisher that sends one message per channel per second.
 */

const relay = PROTOCOLS.relay;
const wallNow = () => performance.timeOrigin + performance.now();

interface Slice {
  key: TenantKey;
  /** Contract topics, each subscribed by `perTopic` connections of this process. */
  topics: string[];
  perTopic: number;
}

interface Conn {
  ws: WebSocket;
  tenantId: string;
}

const conns: Conn[] = [];
const closes = new Map<string, Array<{ at: number; code: number }>>();
let latencies: number[] = [];
let delivered = 0;
let deliveredTotal = 0;

interface Frame {
  type?: string;
  topic?: string;
  data?: { t?: number };
  frames?: Frame[];
}

function received(frame: Frame, at: number): void {
  if (frame.type === 'batch') {
    // A compact batch's messages of its own topic come without type and topic.
    for (const inner of frame.frames ?? []) received(frame.topic !== undefined && inner.type === undefined ? { ...inner, type: 'message' } : inner, at);
    return;
  }
  const t = frame.data?.t;
  if (frame.type !== 'message' || typeof t !== 'number') return;
  latencies.push(at - t);
  delivered += 1;
  deliveredTotal += 1;
}

function onMessage(data: Buffer): void {
  // Only frames with messages (alone or in a batch, asked for by `?batch=2` as the SDK does) are parsed.
  if (data.indexOf('"created_at":"') < 0) return;
  received(JSON.parse(data.toString()) as Frame, wallNow());
}

async function openOne(base: string, localAddress: string, key: TenantKey, topic: string): Promise<void> {
  const ws = new WebSocket(relay.url(base), { headers: relay.headers(signToken(key)), perMessageDeflate: false, localAddress });
  ws.on('error', () => {});
  const tenantId = key.tenantId;
  ws.on('close', (code) => {
    let list = closes.get(tenantId);
    if (!list) closes.set(tenantId, (list = []));
    list.push({ at: wallNow(), code });
  });
  try {
    await relay.handshake(ws, 'subscribed', topic);
  } catch (err) {
    ws.terminate();
    throw err;
  }
  // ws would build and drop errors as each close completes: a client process's CPU, not the server's.
  skipRepeatedWsEnds(ws);
  ws.on('message', onMessage);
  conns.push({ ws, tenantId });
}

async function open(args: { base: string; localAddress: string; slices: Slice[]; concurrency: number }) {
  const plan: Array<[TenantKey, string]> = [];
  for (const s of args.slices) for (const topic of s.topics) for (let i = 0; i < s.perTopic; i++) plan.push([s.key, topic]);
  let next = 0;
  let failed = 0;
  let firstError: string | undefined;
  const started = performance.now();
  const lane = async () => {
    while (next < plan.length) {
      const [key, topic] = plan[next++]!;
      try {
        await openOne(args.base, args.localAddress, key, topic);
      } catch (err) {
        failed += 1;
        firstError ??= err instanceof Error ? err.message : String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(args.concurrency, plan.length) }, lane));
  return { opened: plan.length - failed, failed, ms: performance.now() - started, ...(firstError !== undefined && { firstError }) };
}

/** Starts a measurement window: latencies and deliveries from now on. */
function mark() {
  latencies = [];
  delivered = 0;
  return { ok: true };
}

function stats() {
  return { latencies, delivered, deliveredTotal };
}

/** Waits (bounded) until every connection of `tenantId` here has closed; says how the others stand. */
async function awaitClosed({ tenantId, timeoutMs }: { tenantId: string; timeoutMs: number }) {
  const mine = conns.filter((c) => c.tenantId === tenantId).length;
  const deadline = Date.now() + timeoutMs;
  const seen = () => closes.get(tenantId) ?? [];
  while (seen().length < mine && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  const codes: Record<string, number> = {};
  for (const c of seen()) codes[c.code] = (codes[c.code] ?? 0) + 1;
  const others = conns.filter((c) => c.tenantId !== tenantId);
  return { total: mine, closed: seen().length, times: seen().map((c) => c.at), codes, othersOpen: others.filter((c) => c.ws.readyState === c.ws.OPEN).length, others: others.length };
}

async function closeAll() {
  const waits = conns.splice(0).map(
    ({ ws }) =>
      new Promise<void>((resolve) => {
        if (ws.readyState === ws.CLOSED) return resolve();
        ws.once('close', () => resolve());
        ws.terminate();
      }),
  );
  await Promise.all(waits);
  closes.clear();
  return { closed: waits.length };
}

// The publisher: one connection per tenant, each of its topics once per second, spread over the second.
interface Publisher {
  ws: WebSocket;
  topics: string[];
  sent: number;
  /** `published` replies: the messages realtime accepted, which every subscriber must receive. */
  acked: number;
  errors: number;
}
let publishers: Publisher[] = [];
let pumpTimer: NodeJS.Timeout | undefined;

async function publishStart(args: { base: string; tenants: Array<{ key: TenantKey; topics: string[] }>; maxSeconds: number }) {
  publishers = await Promise.all(
    args.tenants.map(async ({ key, topics }) => {
      const ws = new WebSocket(relay.url(args.base), { headers: relay.headers(signToken(key)), perMessageDeflate: false });
      ws.on('error', () => {});
      await relay.handshake(ws, 'ready', undefined);
      const p: Publisher = { ws, topics, sent: 0, acked: 0, errors: 0 };
      ws.on('message', (data: Buffer) => {
        if (data.indexOf('"type":"published"') >= 0) p.acked += 1;
        else if (data.indexOf('"type":"error"') >= 0) p.errors += 1;
      });
      return p;
    }),
  );
  const started = performance.now();
  const pump = () => {
    const elapsedS = (performance.now() - started) / 1000;
    if (elapsedS > args.maxSeconds) return publishStopNow();
    for (const p of publishers) {
      // Topic k of n is due at k/n of each second.
      const due = Math.floor(elapsedS * p.topics.length);
      while (p.sent < due && p.ws.readyState === p.ws.OPEN) {
        p.ws.send(relay.publishFrame(p.topics[p.sent % p.topics.length]!, { t: wallNow() }));
        p.sent += 1;
      }
    }
  };
  pumpTimer = setInterval(pump, 2);
  return { started: true };
}

function publishStopNow(): void {
  if (pumpTimer) clearInterval(pumpTimer);
  pumpTimer = undefined;
}

async function publishStop() {
  publishStopNow();
  // Every publish answered before the socket goes: terminating at once dropped the
  // last frames still on their way (counted as sent, never seen by realtime).
  const answered = () => publishers.every((p) => p.acked + p.errors >= p.sent);
  for (let i = 0; i < 100 && !answered(); i++) await new Promise((r) => setTimeout(r, 50));
  const sum = (f: (p: Publisher) => number) => publishers.reduce((s, p) => s + f(p), 0);
  const result = { sent: sum((p) => p.sent), acked: sum((p) => p.acked), errors: sum((p) => p.errors) };
  for (const p of publishers) p.ws.terminate();
  publishers = [];
  return result;
}

serveWorker({ open, mark, stats, awaitClosed, closeAll, publishStart, publishStop }, async () => {
  publishStopNow();
  await closeAll();
});
