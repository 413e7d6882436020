import { listen } from '@service-relay/core';
import { createServer } from 'node:http';
import { Server } from 'socket.io';
import { serveWorker } from '../lib/worker-runtime';

/** The peer baseline: socket.io broadcasting to a room (`io.to(room).emit`). */
const http = createServer();
const io = new Server(http, { transports: ['websocket'], perMessageDeflate: false, serveClient: false });
let seq = 0;

io.on('connection', (socket) => {
  socket.on('subscribe', (topic: unknown) => {
    if (typeof topic !== 'string') return;
    void socket.join(topic);
    socket.emit('subscribed', topic);
  });
  socket.on('publish', (frame: { topic?: unknown; data?: unknown }) => {
    if (typeof frame?.topic !== 'string') return;
    const now = Date.now();
    io.to(frame.topic).emit('message', {
      type: 'message',
      topic: frame.topic,
      id: `${now}-${seq++}`,
      user_id: '00000000-0000-4000-8000-000000000000',
      data: frame.data,
      created_at: new Date(now).toISOString(),
    });
  });
});

serveWorker(
  {
    start: async () => ({ port: await listen(http, 0, '127.0.0.1') }),
    connections: () => io.engine.clientsCount,
  },
  () =>
    new Promise<void>((resolve) => {
      io.disconnectSockets(true);
      void io.close(() => resolve());
    }),
);
