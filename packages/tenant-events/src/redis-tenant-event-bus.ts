import { randomUUID } from 'node:crypto';
import { createRedis, redisPing, redisReady, type Logger, type Redis } from '@service-relay/core';
import { parseTenantEvent, type TenantEvent } from './tenant-event';
import type { PublishResult, TenantEventBus, TenantEventHandler } from './tenant-event-bus';

interface PendingAck {
  acks: number;
  expected: number | undefined;
  done: () => void;
}

/**
 * Redis pub/sub bus. PUBLISH returns how many consumers received the event;
 * each consumer answers on an ack channel once its handlers finished, and
 * publish() waits for that many acks (bounded by ackTimeoutMs).
 */
export class RedisTenantEventBus implements TenantEventBus {
  private readonly pub: Redis;
  private readonly sub: Redis;
  private readonly eventsChannel: string;
  private readonly ackChannel: string;
  private readonly handlers = new Set<TenantEventHandler>();
  private readonly resetHandlers = new Set<() => void | Promise<void>>();
  private readonly pending = new Map<string, PendingAck>();
  private subscribedEvents: Promise<unknown> | undefined;
  private subscribedAcks: Promise<unknown> | undefined;
  private wasReady = false;
  private lostSinceReady = false;

  constructor(
    url: string,
    prefix: string,
    private readonly logger: Logger,
    private readonly ackTimeoutMs = 2000,
  ) {
    this.eventsChannel = `${prefix}tenant-events`;
    this.ackChannel = `${prefix}tenant-events:ack`;
    this.pub = createRedis(url, { connectionName: `${prefix}events-pub` });
    this.sub = createRedis(url, { connectionName: `${prefix}events-sub`, enableOfflineQueue: true, maxRetriesPerRequest: null });
    this.pub.on('error', () => {});
    this.sub.on('error', (err: Error) => this.logger.debug({ err: err.message }, 'tenant event bus connection error'));
    this.sub.on('close', () => {
      if (this.wasReady) this.lostSinceReady = true;
    });
    this.sub.on('ready', () => {
      if (this.lostSinceReady) {
        this.lostSinceReady = false;
        this.logger.warn('tenant event bus reconnected; dropping state that may have missed events');
        for (const h of this.resetHandlers) void Promise.resolve().then(h).catch((err: unknown) => this.logger.error({ err }, 'reset handler failed'));
      }
      this.wasReady = true;
    });
    this.sub.on('message', (channel: string, message: string) => {
      if (channel === this.ackChannel) this.onAck(message);
      else if (channel === this.eventsChannel) void this.onEvent(message);
    });
  }

  async publish(e: Omit<TenantEvent, 'event_id'>): Promise<PublishResult> {
    this.subscribedAcks ??= this.sub.subscribe(this.ackChannel);
    await this.subscribedAcks;
    const event: TenantEvent = { ...e, event_id: randomUUID() };
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    const entry: PendingAck = { acks: 0, expected: undefined, done: resolveDone };
    this.pending.set(event.event_id, entry);
    try {
      const delivered = await this.pub.publish(this.eventsChannel, JSON.stringify(event));
      entry.expected = delivered;
      if (entry.acks >= delivered) entry.done();
      const timer = setTimeout(() => entry.done(), this.ackTimeoutMs);
      await done;
      clearTimeout(timer);
      if (entry.acks < delivered) {
        this.logger.warn({ tenant_id: event.tenant_id, kind: event.kind, delivered, acknowledged: entry.acks }, 'not every consumer acknowledged a tenant event in time');
      }
      return { delivered, acknowledged: Math.min(entry.acks, delivered) };
    } finally {
      this.pending.delete(event.event_id);
    }
  }

  subscribe(handler: TenantEventHandler): () => void {
    this.handlers.add(handler);
    this.subscribedEvents ??= this.sub.subscribe(this.eventsChannel).catch((err: unknown) => {
      this.subscribedEvents = undefined;
      this.logger.error({ err }, 'could not subscribe to tenant events');
    });
    return () => this.handlers.delete(handler);
  }

  onReset(handler: () => void | Promise<void>): () => void {
    this.resetHandlers.add(handler);
    return () => this.resetHandlers.delete(handler);
  }

  isConnected(): boolean {
    return this.sub.status === 'ready';
  }

  async ready(): Promise<boolean> {
    if (this.subscribedEvents) await this.subscribedEvents;
    // Both connections open on their own; a bus created a moment ago is
    // still connecting, which is not the same as being down.
    await redisReady(this.pub, 2000).catch(() => {});
    return this.isConnected() && (await redisPing(this.pub));
  }

  async close(): Promise<void> {
    this.handlers.clear();
    this.resetHandlers.clear();
    for (const p of this.pending.values()) p.done();
    this.sub.disconnect();
    this.pub.disconnect();
  }

  private async onEvent(message: string): Promise<void> {
    const event = parseTenantEvent(message);
    if (!event) {
      this.logger.warn('ignoring a malformed tenant event');
      return;
    }
    const results = await Promise.allSettled([...this.handlers].map(async (h) => h(event)));
    for (const r of results) {
      if (r.status === 'rejected') this.logger.error({ err: r.reason, tenant_id: event.tenant_id, kind: event.kind }, 'tenant event handler failed');
    }
    // A consumer whose handler failed does not acknowledge: the publisher then
    // reports the shortfall instead of pretending the change was applied.
    if (results.every((r) => r.status === 'fulfilled')) {
      await this.pub.publish(this.ackChannel, event.event_id).catch((err: unknown) => this.logger.warn({ err }, 'could not acknowledge a tenant event'));
    }
  }

  private onAck(eventId: string): void {
    const entry = this.pending.get(eventId);
    if (!entry) return;
    entry.acks += 1;
    if (entry.expected !== undefined && entry.acks >= entry.expected) entry.done();
  }
}
