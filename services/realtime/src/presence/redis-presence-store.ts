import { randomUUID } from 'node:crypto';
import { redisReady, RelayError, withTimeout, type Logger, type Redis } from '@service-relay/core';
import type { ChannelRef } from '../messaging/message';
import type { Scheduler } from '../timers/scheduler';
import type { PresenceListener, PresenceStore, StoredMember } from './presence-store';
import { sweepIntervalMs } from './presence-store';
import { channelKey, membershipKey, parseEvent, PresenceKeys, refOf } from './redis-presence-keys';
import { globLiteral, unlinkMatching } from '../purge/redis-scan';
import { definePresenceCommands, type EmitArgs, type PresenceCommands } from './redis-presence-scripts';
import type { PresenceWebhooks } from './presence-store';

export interface RedisPresenceStoreOptions {
  /** Commands and scripts. */
  redis: Redis;
  /** A connection of its own for the event channels (a subscribed connection takes no commands). */
  subscriber: Redis;
  /** REDIS_PREFIX. */
  prefix: string;
  /** PRESENCE_TTL_MS: an instance whose last heartbeat is this old is dead, and its members are removed. */
  ttlMs: number;
  scheduler: Scheduler;
  logger: Logger;
  /** A Redis call slower than this counts as failed (default 1 s). */
  deadlineMs?: number;
  /** Webhook events of this store's joins and leaves, appended in the same script (#32); absent: none. */
  webhooks?: PresenceWebhooks & { stream: string };
}

interface Membership {
  ref: ChannelRef;
  connId: string;
  userId: string;
  dataJson: string | undefined;
}

interface EventChannel {
  ref: ChannelRef;
  listeners: Set<PresenceListener>;
  subscribed: Promise<unknown>;
}

/** Dead instances claimed per sweep, at most (the next sweep takes the rest). */
const SWEEP_BATCH = 16;

/**
 * Presence shared by every realtime instance on one Redis. Each instance
 * writes its memberships under its own id and beats (a sorted set of
 * instances by last beat) every TTL/3; every instance also sweeps: an
 * instance whose beat is older than the TTL is claimed by exactly one
 * sweeper (an atomic script), which removes its memberships channel by
 * channel and publishes `leave` for users left with no connection. A member
 * of a SIGKILLed instance is therefore gone within TTL + TTL/3.
 *
 * An instance that finds itself swept (it stalled longer than the TTL), or
 * whose write may or may not have landed (a timeout, Redis down), gives up
 * its id and writes every membership again under a new one: whatever it left
 * behind under the old id is swept like a dead instance's, never kept.
 */
export class RedisPresenceStore implements PresenceStore {
  private readonly redis: PresenceCommands;
  private readonly k: PresenceKeys;
  private readonly base = randomUUID();
  private generation = 0;
  private instanceId: string;
  /** This instance's memberships, to write again under a new id. */
  private readonly memberships = new Map<string, Membership>();
  /** Memberships per channel here: the instance's channel set gains a channel at its first and loses it after its last. */
  private readonly perChannel = new Map<string, number>();
  private readonly events = new Map<string, EventChannel>();
  private readonly beatMs: number;
  private readonly deadlineMs: number;
  /** The current id has not been announced (and its memberships written) yet. */
  private fresh = true;
  private cancelBeat: () => void = () => {};
  private closed = false;
  private lastError = '';
  private ticking: Promise<void> = Promise.resolve();
  /** When this instance last beat successfully, and since when without a gap (its own clock). */
  private lastBeatAt: number | undefined;
  private beatingSince = 0;

  constructor(private readonly opts: RedisPresenceStoreOptions) {
    this.instanceId = this.base;
    this.beatMs = sweepIntervalMs(opts.ttlMs);
    this.deadlineMs = opts.deadlineMs ?? 1000;
    this.redis = definePresenceCommands(opts.redis);
    this.k = new PresenceKeys(opts.prefix);
    opts.subscriber.on('message', (channel: string, payload: string) => this.onEvent(channel, payload));
    void this.tick();
  }

  /** This instance's current id in the instances set (tests). */
  get id(): string {
    return this.instanceId;
  }

  async join(ref: ChannelRef, connId: string, userId: string, dataJson: string | undefined): Promise<void> {
    if (this.closed) throw new RelayError('unavailable', 'presence store closed');
    const m: Membership = { ref, connId, userId, dataJson };
    const key = membershipKey(ref, connId);
    if (this.memberships.has(key)) return;
    this.memberships.set(key, m);
    const first = this.count(ref, +1) === 1;
    if (this.redis.status !== 'ready') {
      try {
        await redisReady(this.redis, 2 * this.deadlineMs);
      } catch (err) {
        this.forget(key, m);
        throw new RelayError('unavailable', 'presence store unavailable', { cause: err });
      }
      // Left while this waited: nothing to write.
      if (this.memberships.get(key) !== m) return;
    }
    const id = this.instanceId;
    // In call order on one connection: the instance is listed (so it can be
    // swept) and the channel is in its set before the membership exists.
    const announced = this.fresh ? this.redis.relayPresenceBeat(this.k.instances, id, this.opts.scheduler.now(), '1') : undefined;
    const listed = first || this.fresh ? this.redis.sadd(this.k.instance(id), channelKey(ref)) : undefined;
    const joined = this.redis.relayPresenceJoin(...this.k.channel(ref, id), connId, userId, dataJson === undefined ? '0' : '1', dataJson ?? '', this.k.events(ref), ...this.emit('join', ref));
    try {
      await withTimeout(Promise.all([announced, listed, joined]), this.deadlineMs);
    } catch (err) {
      this.forget(key, m);
      // It may have landed: this id's writes can no longer be vouched for.
      this.abandon(id, err);
      throw new RelayError('unavailable', 'presence store unavailable', { cause: err });
    }
  }

  async leave(ref: ChannelRef, connId: string): Promise<void> {
    const key = membershipKey(ref, connId);
    if (!this.memberships.delete(key)) return;
    const last = this.count(ref, -1) === 0;
    if (this.closed) return;
    const id = this.instanceId;
    const left = this.redis.relayPresenceLeave(...this.k.channel(ref, id), connId, this.k.events(ref), ...this.emit('leave', ref));
    const unlisted = last ? this.redis.srem(this.k.instance(id), channelKey(ref)) : undefined;
    try {
      await withTimeout(Promise.all([left, unlisted]), this.deadlineMs);
    } catch (err) {
      // Not removed, or not known to be: the old id is swept, the rest written again under a new one.
      this.abandon(id, err);
    }
  }

  /**
   * Forgets this instance's memberships of the tenant (a late leave or a
   * re-announce under a new id writes none), takes its channels out of this
   * instance's set, and deletes every key of the tenant's presence channels
   * (`<prefix>presence:{<tenant>:…`). Every instance runs it for its own set.
   */
  async purgeTenant(tenantId: string): Promise<void> {
    const head = `${tenantId}/`;
    for (const [key] of [...this.memberships]) if (key.startsWith(head)) this.memberships.delete(key);
    const channels = [...this.perChannel.keys()].filter((k) => k.startsWith(head));
    for (const k of channels) this.perChannel.delete(k);
    if (this.redis.status !== 'ready') await redisReady(this.redis, 2 * this.deadlineMs);
    if (channels.length > 0) await this.redis.srem(this.k.instance(this.instanceId), ...channels);
    await unlinkMatching(this.redis, `${globLiteral(this.k.tenantPrefix)}{${globLiteral(tenantId)}:*`);
  }

  async members(ref: ChannelRef): Promise<StoredMember[]> {
    let reply: [string[], string[]];
    try {
      if (this.redis.status !== 'ready') await redisReady(this.redis, 2 * this.deadlineMs);
      reply = await withTimeout(this.redis.relayPresenceMembers(this.k.users(ref), this.k.data(ref)), this.deadlineMs);
    } catch (err) {
      throw new RelayError('unavailable', 'presence store unavailable', { cause: err });
    }
    const [users, data] = reply;
    const dataOf = new Map<string, string>();
    for (let i = 0; i + 1 < data.length; i += 2) dataOf.set(data[i]!, data[i + 1]!);
    const members: StoredMember[] = [];
    for (let i = 0; i + 1 < users.length; i += 2) {
      if (Number(users[i + 1]) > 0) members.push({ userId: users[i]!, dataJson: dataOf.get(users[i]!) });
    }
    return members;
  }

  async subscribe(ref: ChannelRef, listener: PresenceListener): Promise<() => void> {
    const name = this.k.events(ref);
    let ch = this.events.get(name);
    if (!ch) {
      ch = { ref, listeners: new Set(), subscribed: this.opts.subscriber.subscribe(name) };
      this.events.set(name, ch);
    }
    const entry = ch;
    entry.listeners.add(listener);
    const stop = () => {
      entry.listeners.delete(listener);
      if (entry.listeners.size > 0 || this.events.get(name) !== entry) return;
      this.events.delete(name);
      this.opts.subscriber.unsubscribe(name).catch(() => {});
    };
    try {
      await withTimeout(entry.subscribed, this.deadlineMs * 2);
    } catch (err) {
      stop();
      throw new RelayError('unavailable', 'presence events unavailable', { cause: err });
    }
    return stop;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelBeat();
    this.events.clear();
    const id = this.instanceId;
    await withTimeout(this.removeInstance(id), this.deadlineMs * 2).catch((err: unknown) => {
      this.opts.logger.warn({ err: (err as Error).message }, 'presence: members not removed at stop; the sweep of another instance removes them');
    });
    this.memberships.clear();
    this.perChannel.clear();
  }

  /** One heartbeat and one sweep (the timer calls it every TTL/3; tests may call it directly). One at a time. */
  tick(): Promise<void> {
    this.ticking = this.ticking.then(() => this.beatAndSweep());
    return this.ticking;
  }

  private async beatAndSweep(): Promise<void> {
    this.cancelBeat();
    try {
      const now = this.opts.scheduler.now();
      // After a gap longer than the TTL in this instance's own beats (Redis
      // was unreachable for everyone, the process stalled, it just started)
      // the others' beats may be stale for the same reason: judge them only
      // once they have had a whole beat interval to beat again.
      const gap = this.lastBeatAt === undefined || now - this.lastBeatAt > this.opts.ttlMs;
      await this.beat();
      if (gap) this.beatingSince = now;
      this.lastBeatAt = now;
      if (now - this.beatingSince >= this.beatMs) await this.sweep();
      this.recovered();
    } catch (err) {
      this.failed(err);
    } finally {
      if (!this.closed) this.cancelBeat = this.opts.scheduler.at(this.opts.scheduler.now() + this.beatMs, () => void this.tick());
    }
  }

  /**
   * Announces this instance. A fresh id also gets every membership written
   * (issued at once, so later leaves follow it in order).
   */
  private async beat(): Promise<void> {
    if (this.closed) return;
    if (this.redis.status !== 'ready') await redisReady(this.redis, 2 * this.deadlineMs);
    const id = this.instanceId;
    const now = this.opts.scheduler.now();
    if (!this.fresh) {
      const alive = await withTimeout(this.redis.relayPresenceBeat(this.k.instances, id, now, '0'), this.deadlineMs);
      if (alive === 1) return;
      this.opts.logger.warn({ instance: id }, 'presence: this instance was swept as dead (stalled past PRESENCE_TTL_MS); writing its members again under a new id');
      if (this.instanceId === id) this.renew();
    }
    const fresh = this.instanceId;
    // Issued back to back, not as a pipeline: on a Redis Cluster the channels'
    // keys are in different slots, and a pipeline must stay on one node. Each
    // node's connection still runs them in order, before any later leave.
    const writes: Promise<unknown>[] = [this.redis.relayPresenceBeat(this.k.instances, fresh, now, '1')];
    for (const k of this.perChannel.keys()) writes.push(this.redis.sadd(this.k.instance(fresh), k));
    for (const m of this.memberships.values()) {
      writes.push(this.redis.relayPresenceJoin(...this.k.channel(m.ref, fresh), m.connId, m.userId, m.dataJson === undefined ? '0' : '1', m.dataJson ?? '', this.k.events(m.ref), ...this.emit('join', m.ref)));
    }
    await withTimeout(Promise.all(writes), this.deadlineMs);
    if (this.instanceId === fresh) this.fresh = false;
  }

  /** Claims instances whose beat is older than the TTL and removes their members. */
  private async sweep(): Promise<void> {
    if (this.closed) return;
    const now = this.opts.scheduler.now();
    const cutoff = now - this.opts.ttlMs;
    const [dead, unfinished] = await withTimeout(
      Promise.all([
        this.redis.zrangebyscore(this.k.instances, '-inf', cutoff, 'LIMIT', 0, SWEEP_BATCH),
        this.redis.zrangebyscore(this.k.sweeping, '-inf', cutoff, 'LIMIT', 0, SWEEP_BATCH),
      ]),
      this.deadlineMs,
    );
    for (const id of new Set([...dead, ...unfinished])) {
      if (id === this.instanceId) continue;
      const won = await withTimeout(this.redis.relayPresenceClaim(this.k.instances, this.k.sweeping, id, cutoff, now), this.deadlineMs);
      if (won !== 1) continue;
      const left = await this.removeInstance(id);
      await this.redis.zrem(this.k.sweeping, id);
      this.opts.logger.info({ instance: id, users_left: left }, 'presence: swept the members of an instance that stopped beating');
    }
  }

  /** Every membership of `id`, channel by channel, then its channel set and its place among the instances. */
  private async removeInstance(id: string): Promise<number> {
    const setKey = this.k.instance(id);
    let left = 0;
    for (;;) {
      const batch = await this.redis.srandmember(setKey, 100);
      if (batch.length === 0) break;
      for (const k of batch) {
        const ref = refOf(k);
        if (ref) left += await this.redis.relayPresenceRemove(...this.k.channel(ref, id), this.k.events(ref), ...this.emit('leave', ref));
        await this.redis.srem(setKey, k);
      }
    }
    await this.redis.zrem(this.k.instances, id);
    return left;
  }

  /** The scripts' webhook arguments for a join or a leave on `ref` (none without webhooks, or when the tenant does not want the event). */
  private emit(kind: 'join' | 'leave', ref: ChannelRef): EmitArgs {
    const w = this.opts.webhooks;
    if (!w || (w.wants && !w.wants(ref.tenantId, w.names[kind]))) return [];
    return [w.stream, w.names[kind], ref.tenantId, w.withChannel ? ref.channel : '', w.withUser ? '1' : '0', this.opts.scheduler.now()];
  }

  /** Takes back a membership whose join failed, unless a leave already did. */
  private forget(key: string, m: Membership): void {
    if (this.memberships.get(key) !== m) return;
    this.memberships.delete(key);
    this.count(m.ref, -1);
  }

  /** Gives up an id whose writes may be wrong: its beats stop, so it is swept; everything is written again under a new one. */
  private abandon(id: string, err: unknown): void {
    if (this.instanceId !== id || this.closed) return;
    this.failed(err);
    this.renew();
  }

  private renew(): void {
    this.instanceId = `${this.base}.${++this.generation}`;
    this.fresh = true;
  }

  private count(ref: ChannelRef, delta: number): number {
    const k = channelKey(ref);
    const n = (this.perChannel.get(k) ?? 0) + delta;
    if (n <= 0) this.perChannel.delete(k);
    else this.perChannel.set(k, n);
    return n;
  }

  private onEvent(channel: string, payload: string): void {
    const ch = this.events.get(channel);
    if (!ch) return;
    const event = parseEvent(payload);
    if (!event) return;
    for (const l of ch.listeners) {
      try {
        l(event);
      } catch {
        // One failing listener must not starve the others.
      }
    }
  }

  private failed(err: unknown): void {
    const message = (err as Error).message;
    if (message !== this.lastError) this.opts.logger.warn({ err: message }, 'presence: redis call failed; members are written again once it answers');
    this.lastError = message;
  }

  private recovered(): void {
    if (this.lastError !== '') this.opts.logger.info('presence: back on redis');
    this.lastError = '';
  }
}
