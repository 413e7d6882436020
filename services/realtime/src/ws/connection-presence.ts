import { presenceEnabled, type ChannelRules } from '@service-relay/channels';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { channelAccess } from '../authz/channel-access';
import type { ChannelRef } from '../messaging/message';
import type { Presence } from '../presence/presence';
import { replyFrame, type Ref } from './client-frame';
import type { FrameConnection } from './connection-context';
import type { Subscription, SubscriptionPresence } from './subscription';

/** How a subscribe joins a presence channel. */
export interface PresenceJoin {
  /** Also sees joins and leaves. */
  watching: boolean;
  /** The subscribe frame's `member`, as JSON text. */
  dataJson: string | undefined;
}

/**
 * Subscribers of a presence channel are members; those the rules and cap give
 * `presence` also see joins and leaves. Undefined: no presence here, or not on
 * this channel.
 */
export function presenceJoinOf(
  presence: Presence | undefined,
  identity: VerifiedIdentity,
  rules: ChannelRules,
  channel: string,
  dataJson: string | undefined,
): PresenceJoin | undefined {
  if (!presence || !presenceEnabled(rules, channel)) return undefined;
  return { watching: channelAccess(rules, identity.cap, identity.userId, channel, 'presence') === 'allow', dataJson };
}

/** The `presence` request: the members of a presence channel, on every instance, sorted by user_id. */
export async function listPresence(
  conn: FrameConnection,
  presence: Presence | undefined,
  name: string,
  ref: ChannelRef,
  rules: ChannelRules,
  frameRef: Ref | undefined,
): Promise<void> {
  if (!presence || !presenceEnabled(rules, ref.channel)) return conn.error('presence_not_enabled', frameRef);
  const members = await presence.list(ref);
  if (!conn.serving()) return;
  conn.send(replyFrame({ type: 'presence', topic: name, members }, frameRef));
}

/**
 * One connection's presence memberships: its membership id (one per
 * connection), and the join and leave of each of its subscriptions on a
 * presence channel. Made on the connection's first presence join.
 */
export class PresenceMemberships {
  private readonly id: string;

  constructor(
    private readonly presence: Presence,
    private readonly conn: FrameConnection,
  ) {
    this.id = presence.connectionId();
  }

  /** A member (and watching, when allowed); resolves once the others can see it. */
  async join(sub: Subscription, join: PresenceJoin): Promise<void> {
    const presence = this.presence;
    const state: SubscriptionPresence = { watching: join.watching, joined: false };
    sub.presence = state;
    if (join.watching) await presence.watch(sub.topic, sub.ref, sub, this.conn);
    if (sub.cancelled) return;
    await presence.join(sub.ref, this.id, this.conn.identity.userId, join.dataJson);
    state.joined = true;
    // Dropped while the join was in flight: its leave found nothing yet.
    if (sub.cancelled) presence.leave(sub.ref, this.id, true);
  }

  /** The subscription is dropped: it leaves, and stops watching. */
  leave(sub: Subscription): void {
    const p = sub.presence;
    if (!p) return;
    this.presence.leave(sub.ref, this.id, p.joined);
    if (p.watching) this.presence.unwatch(sub.topic, sub);
  }
}
