import { describe, expect, it } from 'vitest';
import { createLogger } from '@service-relay/core';
import { ManualTenantFeed } from '@service-relay/tenant-events';
import type { VerifierClient } from '@service-relay/verifier-client';
import { MemoryMessageBus } from '../messaging/memory-message-bus';
import { createRealtimeMetrics } from '../metrics';
import { TopicHub } from '../topics/topic-hub';
import { fakeConnection, testIdentity } from '../test-support/fake-connection';
import { issueToken, startRealtime, topicFor, useRealtime } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { WebSocket } from 'ws';
import { ConnectionRegistry, type TrackedConnection } from './connection-registry';
import { FeedCutoff } from './feed-cutoff';

const logger = createLogger({ service: 'realtime-test', level: 'silent' });

class Tracked implements TrackedConnection {
  closes: number[] = [];
  readonly identity = testIdentity();
  readonly token = 'token';
  constructor(private readonly registry: ConnectionRegistry) {
    registry.add(this);
  }
  close(code: number): void {
    this.closes.push(code);
    this.registry.remove(this);
  }
  confirm(): void {}
}

describe('FeedCutoff', () => {
  it('serves while current; the first check after the lease is gone closes every connection 1013, and so does every later one for newcomers', () => {
    let current = true;
    const registry = new ConnectionRegistry({} as VerifierClient, createRealtimeMetrics(), new ManualTenantFeed());
    const cutoff = new FeedCutoff({ isCurrent: () => current, registry, logger });
    const a = new Tracked(registry);
    const b = new Tracked(registry);
    expect(cutoff.serving()).toBe(true);
    expect([a.closes, b.closes]).toEqual([[], []]);
    current = false;
    expect(cutoff.serving()).toBe(false);
    expect([a.closes, b.closes]).toEqual([[1013], [1013]]);
    expect(registry.size).toBe(0);
    const late = new Tracked(registry);
    expect(cutoff.serving()).toBe(false);
    expect(late.closes).toEqual([1013]);
    current = true;
    expect(cutoff.serving()).toBe(true);
    const after = new Tracked(registry);
    expect(cutoff.serving()).toBe(true);
    expect(after.closes).toEqual([]);
  });

  it('the fan-out asks it once per message, not per subscriber', async () => {
    let asked = 0;
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 });
    const hub = new TopicHub(bus, undefined, () => (asked++, true));
    const ref = { tenantId: testIdentity().tenantId, channel: 'c' };
    const got: number[] = [];
    for (let i = 0; i < 5; i++) await hub.join('t', ref, { deliver: () => got.push(i) });
    await bus.publish(ref, 'u', '1');
    await new Promise((r) => setImmediate(r));
    expect(got).toHaveLength(5);
    expect(asked).toBe(1);
  });

  // No timer runs here (start() is not called): the delivery path and the frame path must check for themselves.
  describe('between the lease running out and any timer noticing', () => {
    const setup = () => {
      let current = true;
      const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 });
      const metrics = createRealtimeMetrics();
      const registry = new ConnectionRegistry({} as VerifierClient, metrics, new ManualTenantFeed());
      const cutoff = new FeedCutoff({ isCurrent: () => current, registry, logger });
      const identity = testIdentity();
      const { socket, conn } = fakeConnection({ identity, context: { messages: bus, hub: new TopicHub(bus, metrics, cutoff.serving), registry, metrics, serving: cutoff.serving, acceptingPublishes: () => current } });
      const ref = { tenantId: identity.tenantId, channel: 'cut' };
      const topic = topicFor(identity.tenantId, 'cut');
      const settle = () => new Promise((r) => setImmediate(r));
      const closes: number[] = [];
      const close = conn.close.bind(conn);
      conn.close = (code, reason) => {
        closes.push(code);
        close(code, reason);
      };
      return { bus, socket, conn, ref, topic, settle, closes, lose: () => (current = false) };
    };

    it('a message published then reaches no connection, and the connection is closed 1013', async () => {
      const { bus, socket, conn, ref, topic, settle, closes, lose } = setup();
      conn.onFrame(JSON.stringify({ type: 'subscribe', topic, ref: 's' }));
      await settle();
      expect(socket.sent.at(-1)).toMatchObject({ type: 'subscribed', ref: 's' });
      await bus.publish(ref, 'u', '"before"');
      await settle();
      expect(socket.sent.filter((f) => f.type === 'message').map((f) => f.data)).toEqual(['before']);
      lose();
      await bus.publish(ref, 'u', '"after"');
      await settle();
      expect(socket.sent.filter((f) => f.type === 'message').map((f) => f.data)).toEqual(['before']);
      expect(closes).toEqual([1013]);
    });

    it('a frame then is not acted on (no publish stored, no subscription), and the connection is closed 1013', async () => {
      const { bus, socket, conn, ref, topic, settle, closes, lose } = setup();
      lose();
      const sent = socket.sent.length;
      conn.onFrame(JSON.stringify({ type: 'publish', topic, data: 1, ref: 'p' }));
      conn.onFrame(JSON.stringify({ type: 'subscribe', topic, after: '0-0', ref: 's' }));
      await settle();
      expect(socket.sent.slice(sent)).toEqual([]);
      expect((await bus.history(ref, { limit: 10 })).messages).toEqual([]);
      expect(closes).toEqual([1013]);
    });

    it('a replay under way stops at the next page and sends nothing more', async () => {
      const { bus, socket, conn, ref, topic, settle, closes, lose } = setup();
      await bus.publish(ref, 'u', '"old"');
      // The lease runs out while the history is being read.
      const history = bus.history.bind(bus);
      bus.history = async (...args) => {
        const page = await history(...args);
        lose();
        return page;
      };
      conn.onFrame(JSON.stringify({ type: 'subscribe', topic, after: '0-0', ref: 's' }));
      for (let i = 0; i < 10 && closes.length === 0; i++) await settle();
      expect(socket.sent.filter((f) => f.type === 'message' || f.type === 'subscribed')).toEqual([]);
      expect(closes).toEqual([1013]);
    });
  });
});

describe('realtime not current past its lease (server)', () => {
  const feed = new ManualTenantFeed();
  const realtime = useRealtime({ feed });
  const verifier = realtime.verifier;
  const readyz = async () => {
    const res = await fetch(`${realtime.rt.ops}/readyz`);
    return { status: res.status, body: (await res.json()) as { checks: Record<string, boolean> } };
  };

  it('closes live connections 1013, refuses upgrades 503 unavailable and reports not ready; serves again once current', async () => {
    const { token } = issueToken(verifier);
    const live = await WsTestClient.connect(realtime.rt.ws, token);
    expect((await readyz()).status).toBe(200);
    feed.setCurrent(false);
    try {
      // Idle: the instance's own check closes it.
      expect(await live.closed).toMatchObject({ code: 1013 });
      const ready = await readyz();
      expect(ready.status).toBe(503);
      expect(ready.body.checks.tenant_feed).toBe(false);
      const refusal = await WsTestClient.refusal(realtime.rt.ws, { authorization: `Bearer ${token}` });
      expect(refusal.status).toBe(503);
      expect(JSON.parse(refusal.body)).toEqual({ errors: ['unavailable'] });
    } finally {
      feed.setCurrent(true);
    }
    expect((await readyz()).status).toBe(200);
    const again = await WsTestClient.connect(realtime.rt.ws, token);
    expect(again.isOpen).toBe(true);
    await again.close();
  });

  it('a connection admitted while the lease ran out gets no `ready`: closed 1013 at once', async () => {
    // Current until the verifier has been asked once more: the lease runs out while the token is checked.
    const until = verifier.calls;
    class LapsingFeed extends ManualTenantFeed {
      override isCurrent(): boolean {
        return verifier.calls <= until;
      }
    }
    const lapsing = await startRealtime({ verifier, feed: new LapsingFeed() });
    try {
      const { token } = issueToken(verifier);
      const ws = new WebSocket(lapsing.ws, { headers: { authorization: `Bearer ${token}` } });
      const frames: string[] = [];
      ws.on('message', (d) => frames.push(d.toString()));
      const code = await new Promise<number>((resolve) => ws.once('close', resolve));
      expect(code).toBe(1013);
      expect(frames).toEqual([]);
    } finally {
      await lapsing.stop();
    }
  });
});
