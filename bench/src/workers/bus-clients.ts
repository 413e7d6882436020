import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createLogger } from '@service-relay/core';
import { RedisMessageBus, type RedisPubSub } from '@service-relay/realtime';
import { serveWorker } from '../lib/worker-runtime';

/**
 * Realtime's Redis message bus without the WebSocket side, for the
 * `cluster-fanout` scenario: `open` starts buses that each subscribe every
 * channel (each one stands for a realtime instance) and count what their
 * listeners get; `publishStart` publishes through the bus's own publish
 * (the script, its live PUBLISH or SPUBLISH) with a window of publishes in
 * flight, round-robin over the channels. Groups keep the two sides apart.
 */
interface Ref {
  tenantId: string;
  channel: string;
}
interface Group {
  buses: RedisMessageBus[];
  delivered: number;
  published: number;
  publisher?: RedisMessageBus;
  running: boolean;
  loops: Promise<void>[];
}
const logger = createLogger({ service: 'bench-bus', level: 'warn' });
const groups = new Map<string, Group>();
const retention = { maxMessages: 100, ttlS: 600 };

function group(name: string): Group {
  let g = groups.get(name);
  if (!g) {
    g = { buses: [], delivered: 0, published: 0, running: false, loops: [] };
    groups.set(name, g);
  }
  return g;
}

async function open({ group: name, url, prefix, pubsub, channels, subscribers }: { group: string; url: string; prefix: string; pubsub: RedisPubSub; channels: Ref[]; subscribers: number }): Promise<{ livePath: string }> {
  const g = group(name);
  for (let i = 0; i < subscribers; i++) {
    const bus = new RedisMessageBus(url, prefix, retention, logger, 600, () => {}, pubsub);
    g.buses.push(bus);
    for (const ref of channels) {
      await bus.subscribe(ref, () => {
        g.delivered++;
      });
    }
  }
  return { livePath: g.buses[0]?.livePath ?? 'none' };
}

async function publishStart({ group: name, url, prefix, pubsub, channels, window, bytes }: { group: string; url: string; prefix: string; pubsub: RedisPubSub; channels: Ref[]; window: number; bytes: number }): Promise<void> {
  const g = group(name);
  g.publisher ??= new RedisMessageBus(url, prefix, retention, logger, 600, () => {}, pubsub);
  const bus = g.publisher;
  // Connected before the window opens (else each of its publishes waits on 'ready' on its own).
  for (let i = 0; i < 200 && !(await bus.ready()); i++) await new Promise((r) => setTimeout(r, 50));
  const data = JSON.stringify('x'.repeat(Math.max(0, bytes - 2)));
  g.running = true;
  let next = 0;
  g.loops = Array.from({ length: window }, async () => {
    // Bounded: a slice lasts seconds; this many publishes take far longer.
    for (let i = 0; i < 10_000_000 && g.running; i++) {
      const ref = channels[next++ % channels.length]!;
      try {
        await bus.publish(ref, randomUUID().slice(0, 8), data);
        g.published++;
      } catch {
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  });
}

async function publishStop({ group: name }: { group: string }): Promise<void> {
  const g = group(name);
  g.running = false;
  await Promise.all(g.loops);
  g.loops = [];
}

function count({ group: name }: { group: string }): { delivered: number; published: number; atMs: number } {
  const g = group(name);
  return { delivered: g.delivered, published: g.published, atMs: performance.timeOrigin + performance.now() };
}

async function closeAll(): Promise<void> {
  for (const g of groups.values()) {
    g.running = false;
    await Promise.all([...g.buses, ...(g.publisher ? [g.publisher] : [])].map((b) => b.close()));
  }
  groups.clear();
}

serveWorker({ open, publishStart, publishStop, count }, closeAll);
