import { createServer } from 'node:http';
import { listen } from '@service-relay/core';
import { serveWorker } from '../lib/worker-runtime';

/**
 * A host's webhook endpoint for the bench: answers every request 200 at once
 * and counts the requests and the events in them (signatures are the tests'
 * concern; tests/webhooks.test.ts verifies them). Started with `hang`, it
 * reads every request and never answers (the sender's timeout ends each).
 */
let requests = 0;
let events = 0;
let hang = false;
const http = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    requests += 1;
    if (hang) return;
    try {
      events += (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { events?: unknown[] }).events?.length ?? 0;
    } catch {
      // counted as a request without events
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
});

serveWorker(
  {
    start: async (args?: { hang?: boolean }) => {
      hang = args?.hang === true;
      return { url: `http://127.0.0.1:${await listen(http, 0, '127.0.0.1')}/hooks` };
    },
    count: () => ({ requests, events }),
  },
  () =>
    new Promise<void>((resolve) => {
      http.closeAllConnections();
      http.close(() => resolve());
    }),
);
