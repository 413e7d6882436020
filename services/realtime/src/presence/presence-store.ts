import type { TransitionNames, WebhookEventType } from '@service-relay/webhook-events';
import type { ChannelRef } from '../messaging/message';

/**
 * Which webhook events a store's joins and leaves are (#32): the presence
 * store's are member_added/removed; the same store keeps channel occupancy
 * (one "user" per channel) and users' connections (one "channel" per
 * tenant), each under its own prefix (webhooks/transitions.ts).
 */
export interface PresenceWebhooks {
  names: TransitionNames;
  /** The event names the channel (false for the users' one pseudo-channel). */
  withChannel: boolean;
  /** The event names the user (false for occupancy's one pseudo-user). */
  withUser: boolean;
  /**
   * Whether the tenant wants this event recorded (an enabled endpoint wants
   * its type), asked at each join and leave; absent: every event. The counts
   * change either way: only the recording is skipped.
   */
  wants?: (tenantId: string, type: WebhookEventType) => boolean;
}

/** One present user of a channel: several connections of one user are one member. */
export interface StoredMember {
  userId: string;
  /** The member data (JSON text) of the user's most recent join; undefined when that join had none. */
  dataJson: string | undefined;
}

/** A user's first connection joined the channel (across all instances), or its last one left. */
export type PresenceEvent = { type: 'join'; userId: string; dataJson: string | undefined } | { type: 'leave'; userId: string };

export type PresenceListener = (event: PresenceEvent) => void;

/**
 * Who is subscribed to a presence channel, shared by every realtime instance
 * (docs/ARCHITECTURE.md "Presence"). A membership is one connection of one
 * user on one channel; the store collapses a user's memberships into one
 * member and announces `join` when the first appears and `leave` when the
 * last goes, wherever they are.
 *
 * Drivers: memory-presence-store.ts (one process, the embedded default),
 * redis-presence-store.ts (shared; an instance that dies without leaving is
 * swept); factory: create-presence-store.ts; behaviour:
 * presence-store.contract.ts.
 */
export interface PresenceStore {
  /**
   * Adds this instance's connection `connId` as a membership of `userId`
   * (idempotent per connection). Resolves once stored; rejects with
   * `unavailable` when the store cannot take it.
   */
  join(ref: ChannelRef, connId: string, userId: string, dataJson: string | undefined): Promise<void>;
  /** Removes the membership (nothing when there is none). Never rejects: a failed removal is repaired by the store. */
  leave(ref: ChannelRef, connId: string): Promise<void>;
  /** The channel's members, one per user, in no particular order. Rejects with `unavailable`. */
  members(ref: ChannelRef): Promise<StoredMember[]>;
  /** Resolves once `listener` receives every later join and leave of the channel; the function stops it. */
  subscribe(ref: ChannelRef, listener: PresenceListener): Promise<() => void>;
  /**
   * Removes everything stored of a deleted tenant's presence (#30), without
   * leave events: its channels' members and this instance's memberships of
   * them. Its connections are closed already; their late leaves find nothing.
   */
  purgeTenant(tenantId: string): Promise<void>;
  /** Removes every membership of this instance (with their leave events) and stops its timers. */
  close(): Promise<void>;
}

/**
 * How long a member of an instance that stopped without leaving (SIGKILL, a
 * lost host) may still be listed: PRESENCE_TTL_MS after its last heartbeat,
 * plus at most one sweep interval until a live instance notices.
 */
export function ghostBoundMs(ttlMs: number): number {
  return ttlMs + sweepIntervalMs(ttlMs);
}

/** Instances beat, and sweep for dead ones, every third of the TTL: two missed beats still keep an instance alive. */
export function sweepIntervalMs(ttlMs: number): number {
  return Math.max(1, Math.floor(ttlMs / 3));
}
