import { listen } from '@service-relay/core';
import { createServer } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The physical-limit baseline: a bare `ws` server speaking the contract's
 * subscribe/publish frames without auth, history or Redis. A publish builds
 * the message frame once and loops `send` over the topic's sockets.
 */
const http = createServer((_req, res) => {
  res.writeHead(404).end();
});
const wss = new WebSocketServer({ server: http, perMessageDeflate: false });
const topics = new Map<string, Set<WebSocket>>();
let seq = 0;

wss.on('connection', (ws) => {
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
      let set = topics.get(frame.topic);
      if (!set) topics.set(frame.topic, (set = new Set()));
      set.add(ws);
      mine.add(frame.topic);
      ws.send(JSON.stringify({ type: 'subscribed', topic: frame.topic }));
    } else if (frame.type === 'publish') {
      const now = Date.now();
      const text = JSON.stringify({
        type: 'message',
        topic: frame.topic,
        id: `${now}-${seq++}`,
        user_id: '00000000-0000-4000-8000-000000000000',
        data: frame.data,
        created_at: new Date(now).toISOString(),
      });
      for (const peer of topics.get(frame.topic) ?? []) peer.send(text);
    }
  });
  ws.on('close', () => {
    for (const t of mine) topics.get(t)?.delete(ws);
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
