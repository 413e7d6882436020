import { performance } from 'node:perf_hooks';
import { skipRepeatedWsEnds } from '@service-relay/core';
import WebSocket from 'ws';
import { LatencyLog, pace, stampReader } from '../lib/latency-probe';
import { serveWorker } from '../lib/worker-runtime';
import { signTokens, type TenantKey } from '../lib/tokens';
import { PROTOCOLS, type Level, type Variant } from '../lib/ws-protocols';

/**
 * A load-generating process of WebSocket clients: opens groups of connections
 * (timed, with bounded concurrency), counts delivered messages, records when
 * and how connections were closed, runs a window-bounded publisher, and
 * churns connections (connect, subscribe, close) at a steady pace.
 */

interface Group {
  variant: Variant;
  sockets: WebSocket[];
  delivered: number;
  /** WebSocket frames that carried them (a batch frame or a peer's packed frame holds several). */
  frames: number;
  closes: Array<{ at: number; code: number }>;
  /** The `latency` scenario's sampled subscribers' latencies (open's sampleEvery). */
  latency?: LatencyLog;
}

interface OpenArgs {
  group: string;
  variant: Variant;
  base: string;
  count: number;
  concurrency: number;
  level: Level;
  topic?: string;
  key?: TenantKey;
  /** Every n-th socket also reads the send stamps of what it gets (lib/latency-probe.ts); the rest only count. */
  sampleEvery?: number;
}

const groups = new Map<string, Group>();
const wallNow = () => performance.timeOrigin + performance.now();

function groupOf(name: string, variant: Variant): Group {
  let g = groups.get(name);
  if (!g) {
    g = { variant, sockets: [], delivered: 0, frames: 0, closes: [] };
    groups.set(name, g);
  }
  return g;
}

async function openOne(g: Group, args: OpenArgs, token: string | undefined): Promise<void> {
  const proto = PROTOCOLS[args.variant];
  const ws = new WebSocket(proto.url(args.base), proto.protocols ?? [], { headers: proto.headers(token), perMessageDeflate: false });
  ws.on('error', () => {});
  ws.on('close', (code) => g.closes.push({ at: wallNow(), code }));
  try {
    await proto.handshake(ws, args.level, args.topic);
  } catch (err) {
    ws.terminate();
    throw err;
  }
  // ws would build and drop errors as each close completes: a client process's CPU, not the server's.
  skipRepeatedWsEnds(ws);
  if (args.sampleEvery && g.sockets.length % args.sampleEvery === 0) ws.on('message', stampReader((g.latency ??= new LatencyLog()).add));
  // Delivered messages are counted, not parsed: the client side stays cheap.
  // Peers that pack several messages into one frame count them by their headers.
  const counter = proto.counter?.(ws);
  if (counter) {
    ws.on('message', (data: Buffer) => {
      g.delivered += counter(data);
      g.frames += 1;
    });
    g.sockets.push(ws);
    return;
  }
  ws.on('message', (data: Buffer) => {
    if (args.variant === 'socketio') {
      if (data.length === 1 && proto.keepalive(ws, data.toString())) return;
    }
    g.delivered += 1;
    g.frames += 1;
  });
  g.sockets.push(ws);
}

async function open(args: OpenArgs): Promise<{ opened: number; failed: number; ms: number; firstError?: string }> {
  const g = groupOf(args.group, args.variant);
  const tokens = args.key ? signTokens(args.key, args.count) : [];
  let next = 0;
  let opened = 0;
  let failed = 0;
  let firstError: string | undefined;
  const started = performance.now();
  const lane = async () => {
    while (next < args.count) {
      const i = next++;
      try {
        await openOne(g, args, tokens[i]);
        opened += 1;
      } catch (err) {
        failed += 1;
        firstError ??= err instanceof Error ? err.message : String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(args.concurrency, args.count) }, lane));
  const ms = performance.now() - started;
  return firstError === undefined ? { opened, failed, ms } : { opened, failed, ms, firstError };
}

async function closeGroup({ group }: { group: string }): Promise<{ closed: number }> {
  const g = groups.get(group);
  if (!g) return { closed: 0 };
  groups.delete(group);
  const waits = g.sockets.map(
    (ws) =>
      new Promise<void>((resolve) => {
        if (ws.readyState === ws.CLOSED) return resolve();
        ws.once('close', () => resolve());
        ws.terminate();
      }),
  );
  await Promise.all(waits);
  return { closed: g.sockets.length };
}

async function awaitClosed({ group, timeoutMs }: { group: string; timeoutMs: number }) {
  const g = groups.get(group);
  if (!g) return { total: 0, closed: 0, times: [], codes: {} };
  const deadline = Date.now() + timeoutMs;
  while (g.closes.length < g.sockets.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  const codes: Record<string, number> = {};
  for (const c of g.closes) codes[c.code] = (codes[c.code] ?? 0) + 1;
  return { total: g.sockets.length, closed: g.closes.length, times: g.closes.map((c) => c.at), codes };
}

interface Publisher {
  ws: WebSocket;
  running: boolean;
  sent: number;
  echoed: number;
}
const publishers = new Map<string, Publisher>();

async function publishStart(args: { group: string; variant: Variant; base: string; topic: string; window: number; bytes: number; key?: TenantKey }) {
  const proto = PROTOCOLS[args.variant];
  const token = args.key ? signTokens(args.key, 1)[0] : undefined;
  const ws = new WebSocket(proto.url(args.base), proto.protocols ?? [], { headers: proto.headers(token), perMessageDeflate: false });
  ws.on('error', () => {});
  await proto.handshake(ws, 'subscribed', args.topic);
  const p: Publisher = { ws, running: true, sent: 0, echoed: 0 };
  publishers.set(args.group, p);
  const frame = proto.publishFrame(args.topic, 'x'.repeat(args.bytes));
  // The publisher also subscribes: its own echo bounds how far it runs ahead of
  // delivery, so every server gets the same saturating but bounded load.
  const pump = () => {
    while (p.running && p.sent - p.echoed < args.window && ws.readyState === ws.OPEN) {
      ws.send(frame);
      p.sent += 1;
    }
  };
  const counter = proto.counter?.(ws);
  ws.on('message', (data: Buffer) => {
    if (counter) {
      p.echoed += counter(data);
      pump();
      return;
    }
    const text = data.toString();
    if (proto.keepalive(ws, text)) return;
    if (proto.isMessage(text)) {
      p.echoed += 1;
      pump();
    }
  });
  pump();
  return { started: true };
}

async function publishStop({ group }: { group: string }) {
  const p = publishers.get(group);
  if (!p) return { sent: 0, echoed: 0 };
  p.running = false;
  publishers.delete(group);
  // Let the last window drain before closing, so no backlog spills into the next run.
  const deadline = Date.now() + 5000;
  while (p.echoed < p.sent && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  p.ws.terminate();
  return { sent: p.sent, echoed: p.echoed };
}

const pacers = new Map<string, { ws: WebSocket; pacer: { stop(): number } }>();

/** A publisher at a fixed rate, each message stamped with its send time (the `latency` scenario). */
async function paceStart(args: { group: string; variant: Variant; base: string; topic: string; rate: number; bytes: number; key?: TenantKey }) {
  const proto = PROTOCOLS[args.variant];
  const token = args.key ? signTokens(args.key, 1)[0] : undefined;
  const ws = new WebSocket(proto.url(args.base), proto.protocols ?? [], { headers: proto.headers(token), perMessageDeflate: false });
  ws.on('error', () => {});
  await proto.handshake(ws, 'ready', args.topic);
  const pacer = pace(args.rate, args.bytes, (payload) => ws.send(proto.publishFrame(args.topic, payload)));
  pacers.set(args.group, { ws, pacer });
  return { started: true };
}

function paceStop({ group }: { group: string }) {
  const p = pacers.get(group);
  if (!p) return { sent: 0 };
  pacers.delete(group);
  const sent = p.pacer.stop();
  p.ws.terminate();
  return { sent };
}

interface Churn {
  timer: NodeJS.Timeout;
  started: number;
  done: number;
  failed: number;
  firstError?: string;
}
const churns = new Map<string, Churn>();

/**
 * Every `everyMs`, a new user connects, subscribes to a channel of its own
 * (`<channelPrefix>-<n>`) and closes: the connections and subscriptions that
 * come and go beside a steady load (at most 8 under way at once).
 */
function churnStart(args: { group: string; base: string; key: TenantKey; channelPrefix: string; everyMs: number }) {
  const proto = PROTOCOLS.relay;
  const c: Churn = {
    started: 0,
    done: 0,
    failed: 0,
    timer: setInterval(() => {
      if (c.started - c.done - c.failed >= 8) return;
      const topic = `tenants/${args.key.tenantId}/channels/${args.channelPrefix}-${c.started++}`;
      const ws = new WebSocket(proto.url(args.base), { headers: proto.headers(signTokens(args.key, 1)[0]), perMessageDeflate: false });
      let refused = '';
      ws.on('error', () => {});
      ws.once('unexpected-response', (_req, res) => {
        refused = ` (upgrade answered ${res.statusCode})`;
        res.resume();
        ws.terminate();
      });
      proto.handshake(ws, 'subscribed', topic).then(
        () => {
          ws.close();
          c.done += 1;
        },
        (err: unknown) => {
          ws.terminate();
          c.failed += 1;
          c.firstError ??= `${err instanceof Error ? err.message : String(err)}${refused}`;
        },
      );
    }, args.everyMs),
  };
  churns.set(args.group, c);
  return { started: true };
}

async function churnStop({ group }: { group: string }) {
  const c = churns.get(group);
  if (!c) return { done: 0, failed: 0 };
  clearInterval(c.timer);
  churns.delete(group);
  const deadline = Date.now() + 5000;
  while (c.done + c.failed < c.started && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return c.firstError === undefined ? { done: c.done, failed: c.failed } : { done: c.done, failed: c.failed, firstError: c.firstError };
}

serveWorker(
  {
    open: open,
    count: ({ group }: { group: string }) => {
      const g = groups.get(group);
      return { delivered: g?.delivered ?? 0, frames: g?.frames ?? 0, open: g ? g.sockets.length - g.closes.length : 0, atMs: wallNow() };
    },
    close: closeGroup,
    awaitClosed: awaitClosed,
    publishStart: publishStart,
    publishStop: publishStop,
    latencyReset: ({ group }: { group: string }) => {
      groups.get(group)?.latency?.reset();
      return { reset: true };
    },
    latencyTake: ({ group }: { group: string }) => groups.get(group)?.latency?.take() ?? { samples: [], loopDelayP99Ms: 0, loopDelayMaxMs: 0 },
    paceStart: paceStart,
    paceStop: paceStop,
    churnStart: churnStart,
    churnStop: churnStop,
  },
  async () => {
    for (const name of [...groups.keys()]) await closeGroup({ group: name });
  },
);
