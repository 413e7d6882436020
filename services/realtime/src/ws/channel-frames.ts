import { MAX_DATA_BYTES, RelayError } from '@service-relay/core';
import { DEFAULT_CHANNEL_RULES, type ChannelAction, type ChannelRules } from '@service-relay/channels';
import { channelAccess } from '../authz/channel-access';
import { DEFAULT_RULES_LOOKUP } from '../authz/channel-rules-cache';
import { TokenBucket } from '../limits/token-bucket';
import { applyPublishRule } from '../messaging/publish-rule';
import { checkTopic } from '../topics/topic';
import { replyFrame, type ClientFrame, type Ref } from './client-frame';
import { ALWAYS, type ConnectionContext, type FrameConnection } from './connection-context';
import { listPresence, presenceJoinOf, PresenceMemberships, type PresenceJoin } from './connection-presence';
import { Subscription } from './subscription';
import type { TenantLimits } from '@service-relay/tenant-events';

/** The frames about one channel: everything but `auth` and `ping`. */
export type ChannelFrame = Exclude<ClientFrame, { type: 'auth' | 'ping' }>;

/** Only read by unsubscribe, which no rule limits. */
const DEFAULT_RULES = DEFAULT_CHANNEL_RULES;

/**
 * One connection's `subscribe`, `unsubscribe`, `publish` and `presence`
 * frames, and the subscriptions they leave live. Made on the connection's
 * first such frame: most of an idle connection's memory is fixed cost.
 */
export class ChannelFrames {
  /** Created on the first subscribe. */
  private subscriptions: Map<string, Subscription> | undefined;
  /** Created on the first publish, like the subscriptions. */
  private publishBucket: TokenBucket | undefined;
  /** Created on the first presence join. */
  private memberships: PresenceMemberships | undefined;

  constructor(
    private readonly conn: FrameConnection,
    private readonly ctx: ConnectionContext,
  ) {}

  async handle(frame: ChannelFrame): Promise<void> {
    const { conn, ctx } = this;
    // Before any other check: a refused frame costs the server as little as possible.
    const limits = ctx.limits?.get(conn.identity.tenantId);
    if (frame.type === 'publish') {
      const rate = limits ? { ratePerS: limits.connection_publish_rate_per_s, burst: limits.connection_publish_burst } : ctx.publishRate;
      if (rate) {
        let bucket = (this.publishBucket ??= new TokenBucket(rate.ratePerS, rate.burst, ctx.scheduler));
        // The tenant's limits changed since: the bucket follows them (what it holds carries over).
        if (bucket.ratePerS !== rate.ratePerS || bucket.burst !== rate.burst) bucket = this.publishBucket = bucket.resized(rate.ratePerS, rate.burst);
        const taken = bucket.take();
        if (!taken.ok) return conn.refuse('publish_rate', 'rate_limited', frame.ref, { limit: rate.ratePerS, retry_after_ms: taken.retryAfterMs });
      }
      if (limits && ctx.tenantPublishes) {
        const taking = ctx.tenantPublishes.take(conn.identity.tenantId, { ratePerS: limits.publish_rate_per_s, burst: limits.publish_burst });
        const taken = taking instanceof Promise ? await taking : taking;
        if (conn.closed) return;
        if (!taken.ok) return conn.refuse('tenant_publish_rate', 'rate_limited', frame.ref, { limit: limits.publish_rate_per_s, retry_after_ms: taken.retryAfterMs });
      }
    }
    const topic = checkTopic(frame.topic, conn.identity.tenantId);
    if (!topic.ok) return conn.error(topic.code, frame.ref);
    const name = frame.topic as string;
    let rules: ChannelRules = DEFAULT_RULES;
    if (frame.type !== 'unsubscribe') {
      // Known rules decide at once (no await on a publish); rules that must be asked for and cannot be refuse the frame with `unavailable`.
      const lookup = (ctx.channelRules ?? DEFAULT_RULES_LOOKUP)(conn.identity.tenantId);
      rules = lookup instanceof Promise ? await lookup : lookup;
      // Closed while the rules were fetched: nothing more for this connection.
      if (conn.closed) return;
      if (!this.may(rules, topic.ref.channel, frame.type)) return conn.error('forbidden_channel', frame.ref);
    }
    // The host is asked only once the rules and the cap allowed: a callback narrows, never widens (#32).
    let member = frame.type === 'subscribe' ? frame.member : undefined;
    if (ctx.callbacks && (frame.type === 'subscribe' || frame.type === 'publish')) {
      const deciding = ctx.callbacks.decide(conn.identity, topic.ref.channel, frame.type, 'ws');
      const verdict = deciding instanceof Promise ? await deciding : deciding;
      if (conn.closed) return;
      if (!verdict.allow) return conn.error(verdict.code, frame.ref);
      if (verdict.member !== undefined) member = verdict.member;
    }
    if (frame.type === 'presence') return listPresence(conn, ctx.presence, name, topic.ref, rules, frame.ref);
    if (frame.type === 'subscribe') {
      const join = presenceJoinOf(ctx.presence, conn.identity, rules, topic.ref.channel, member);
      return this.subscribe(name, topic.ref, frame.after, frame.epoch, frame.ref, join, limits);
    }
    if (frame.type === 'unsubscribe') {
      const sub = this.subscriptions?.get(name);
      if (sub) this.drop(sub);
      return conn.send(replyFrame({ type: 'unsubscribed', topic: name }, frame.ref));
    }
    const deps = { messages: ctx.messages, acceptingPublishes: ctx.acceptingPublishes ?? ALWAYS };
    const verdict = await applyPublishRule(deps, { ref: topic.ref, userId: conn.identity.userId, data: frame.data, idempotencyKey: frame.idempotencyKey, ...publishLimits(limits) });
    if (!verdict.ok) {
      if (verdict.refusal === 'payload_too_large') return conn.refuse('payload_size', 'payload_too_large', frame.ref, { limit: limits?.max_message_bytes ?? MAX_DATA_BYTES });
      return conn.error(verdict.refusal === 'malformed' ? 'invalid_frame' : verdict.refusal, frame.ref);
    }
    ctx.metrics.messagesIn.inc({ source: 'ws' });
    // The connection's own counters: no lookup per publish (closed meanwhile: the stored message still counts).
    const usage = conn.usage;
    if (usage) {
      usage.publishedWs += 1;
      usage.bytesIn += verdict.bytes;
    } else ctx.usage?.published(conn.identity.tenantId, 'ws', verdict.bytes);
    conn.send(replyFrame({ type: 'published', topic: name, id: verdict.message.id }, frame.ref));
  }

  /** The connection closed: every subscription goes. */
  dropAll(): void {
    if (this.subscriptions) for (const sub of [...this.subscriptions.values()]) this.drop(sub);
  }

  /**
   * Decided with the tenant's rules and the current token's cap: new rules
   * or a refresh with a narrower cap apply to requests after them;
   * subscriptions already live stay (not re-checked retroactively).
   * Unsubscribe is always allowed.
   */
  private may(rules: ChannelRules, channel: string, action: ChannelAction): boolean {
    return channelAccess(rules, this.conn.identity.cap, this.conn.identity.userId, channel, action) === 'allow';
  }

  /**
   * `subscribed` carries the channel's epoch and, with `after`, whether
   * everything after it could be recovered; it precedes every replayed message.
   */
  private async subscribe(
    name: string,
    ref: Subscription['ref'],
    after: string | undefined,
    epoch: string | undefined,
    frameRef: Ref | undefined,
    presence: PresenceJoin | undefined,
    limits: TenantLimits | undefined,
  ): Promise<void> {
    const { conn, ctx } = this;
    const subscriptions = (this.subscriptions ??= new Map());
    if (subscriptions.has(name)) {
      // Already live: no replay, so nothing to recover.
      const current = await ctx.messages.epoch(ref);
      return conn.send(replyFrame({ type: 'subscribed', topic: name, epoch: current }, frameRef));
    }
    const maxSubscriptions = limits?.max_subscriptions ?? ctx.maxSubscriptions;
    if (subscriptions.size >= maxSubscriptions) return conn.refuse('subscriptions', 'too_many_subscriptions', frameRef, { limit: maxSubscriptions });
    if (presence && limits && (await presenceFull(ctx, ref, conn.identity.userId, limits.max_presence_members))) {
      if (conn.closed) return;
      return conn.refuse('presence_members', 'too_many_subscriptions', frameRef, { limit: limits.max_presence_members });
    }
    if (conn.closed || subscriptions.has(name)) return;
    const sub = new Subscription(name, ref, conn);
    subscriptions.set(name, sub);
    try {
      await ctx.hub.join(name, ref, sub);
      if (sub.cancelled) return;
      // A member (and watching, when allowed) before `subscribed`: the reply means the others can see it.
      if (presence) await (this.memberships ??= new PresenceMemberships(ctx.presence!, conn)).join(sub, presence);
      if (sub.cancelled) return;
      if (after === undefined) {
        const current = await ctx.messages.epoch(ref);
        if (sub.cancelled) return;
        conn.send(replyFrame({ type: 'subscribed', topic: name, epoch: current }, frameRef));
      } else {
        const replayed = await sub.replay(
          ctx.messages,
          after,
          epoch,
          (first) => {
            if (first.recovery) ctx.metrics.recovery('ws', first.recovery);
            conn.send(replyFrame({ type: 'subscribed', topic: name, epoch: first.epoch, ...first.recovery }, frameRef));
          },
          conn.serving,
          limits?.history_ttl_s,
        );
        ctx.metrics.messagesOut.inc(replayed);
      }
      // What was held meanwhile goes out only while this instance still vouches for the connection (else it is closed now).
      if (!conn.serving()) return;
      sub.goLive();
    } catch (err) {
      // Without its history the subscription would have a gap: take it back.
      this.drop(sub);
      throw err instanceof RelayError ? err : new RelayError('unavailable', 'subscribe failed', { cause: err });
    }
  }

  private drop(sub: Subscription): void {
    sub.cancelled = true;
    if (this.subscriptions?.get(sub.topic) === sub) this.subscriptions.delete(sub.topic);
    this.ctx.hub.leave(sub.topic, sub);
    this.memberships?.leave(sub);
  }
}

/** The tenant's largest message and history limits, for the publish rule. */
export function publishLimits(limits: TenantLimits | undefined): { maxDataBytes?: number; retention?: { maxMessages: number; ttlS: number } } {
  if (!limits) return {};
  return { maxDataBytes: limits.max_message_bytes, retention: { maxMessages: limits.history_max_messages, ttlS: limits.history_ttl_s } };
}

/**
 * The channel holds `max` members and the user is not one of them. Read
 * before the join (one listing): two joins racing on different instances
 * may both pass at the last place (docs/OPERATIONS.md).
 */
async function presenceFull(ctx: ConnectionContext, ref: Subscription['ref'], userId: string, max: number): Promise<boolean> {
  if (!ctx.presence) return false;
  const members = await ctx.presence.list(ref);
  return members.length >= max && !members.some((m) => m.user_id === userId);
}
