import { listen } from '@service-relay/core';
import { createServer } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The physical-limit baseline: a bare `ws` server speaking the contract's
 * subscribe/publish frames without auth, history or Redis. A publish builds
 * the message frame once and loops `send` over the topic's sockets that asked
 * for plain frames. For those that asked for compact batches (`?batch=2`, as
 * realtime serves them: PROTOCOL.md "Server → client"), a topic's messages of
 * one event-loop turn are held and sent at the end of the turn as one frame,
 * built once for all of them: a lone message as its plain frame, several as
 * `{"type":"batch","topic":T,"frames":[{"id",…},…]}`, at most ~64 KiB each.
 * The clients see the same frames as from realtime.
 */
const MAX_BATCH_BYTES = 64 * 1024;
const USER = '00000000-0000-4000-8000-000000000000';
const READY = JSON.stringify({ type: 'ready', tenant_id: '00000000-0000-4000-8000-000000000001', user_id: USER, expires_at: 4_102_444_800 });

interface Topic {
  plain: Set<WebSocket>;
  batched: Set<WebSocket>;
  /** This turn's messages for the batched sockets: the whole frame and its compact element. */
  held: Array<{ frame: string; compact: string }>;
  heldBytes: number;
  flushPending: boolean;
}

const http = createServer((_req, res) => {
  res.writeHead(404).end();
});
const wss = new WebSocketServer({ server: http, perMessageDeflate: false });
const topics = new Map<string, Topic>();
let seq = 0;

function flush(topic: string, t: Topic): void {
  const held = t.held;
  if (held.length === 0) return;
  t.held = [];
  t.heldBytes = 0;
  const text = held.length === 1 ? held[0]!.frame : `{"type":"batch","topic":${JSON.stringify(topic)},"frames":[${held.map((h) => h.compact).join(',')}]}`;
  for (const peer of t.batched) peer.send(text);
}

function publish(topic: string, data: unknown): void {
  const t = topics.get(topic);
  if (!t) return;
  const now = Date.now();
  const members = `"id":"${now}-${seq++}","user_id":"${USER}","data":${JSON.stringify(data)},"created_at":"${new Date(now).toISOString()}"`;
  const frame = `{"type":"message","topic":${JSON.stringify(topic)},${members}}`;
  for (const peer of t.plain) peer.send(frame);
  if (t.batched.size === 0) return;
  t.held.push({ frame, compact: `{${members}}` });
  t.heldBytes += frame.length;
  if (t.heldBytes >= MAX_BATCH_BYTES) flush(topic, t);
  if (t.flushPending) return;
  t.flushPending = true;
  process.nextTick(() => {
    t.flushPending = false;
    flush(topic, t);
  });
}

wss.on('connection', (ws, req) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const batching = url.searchParams.get('batch') === '2';
  // A client of the whole contract (realtime's path) waits for `ready`: sent
  // at once, the same frame as realtime's, with no token checked (the floor
  // of connect + subscribe in `ws`, connect-rate.ts).
  if (url.pathname === '/ws') ws.send(READY);
  const mine = new Set<string>();
  ws.on('message', (data: Buffer) => {
    let frame: { type?: unknown; topic?: unknown; data?: unknown };
    try {
      frame = JSON.parse(data.toString()) as typeof frame;
    } catch {
      return;
    }
    if (typeof frame.topic !== 'string') return;
    if (frame.type === 'subscribe') {
      let t = topics.get(frame.topic);
      if (!t) topics.set(frame.topic, (t = { plain: new Set(), batched: new Set(), held: [], heldBytes: 0, flushPending: false }));
      (batching ? t.batched : t.plain).add(ws);
      mine.add(frame.topic);
      ws.send(JSON.stringify({ type: 'subscribed', topic: frame.topic }));
    } else if (frame.type === 'publish') publish(frame.topic, frame.data);
  });
  ws.on('close', () => {
    for (const name of mine) {
      const t = topics.get(name);
      t?.plain.delete(ws);
      t?.batched.delete(ws);
    }
  });
});

serveWorker(
  {
    start: async () => ({ port: await listen(http, 0, '127.0.0.1') }),
    connections: () => wss.clients.size,
  },
  () =>
    new Promise<void>((resolve) => {
      for (const ws of wss.clients) ws.terminate();
      http.close(() => resolve());
    }),
);
