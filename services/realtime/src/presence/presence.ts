import { RelayError, type Logger } from '@service-relay/core';
import type { ChannelRef } from '../messaging/message';
import type { RealtimeMetrics } from '../metrics';
import type { PresenceEvent, PresenceStore, StoredMember } from './presence-store';

/** One member as every answer shows it: WS `presence`, REST and the host server API. */
export interface PresenceMember {
  user_id: string;
  /** The member data of the user's most recent join (the subscribe frame's `member`), when it had one. */
  data?: unknown;
}

/** Where presence event frames go (a connection). */
export interface PresenceSink {
  sendMessage(frame: Buffer | string): void;
}

/** Member data: any JSON object whose serialization is at most this many bytes (UTF-8). */
export const MAX_MEMBER_DATA_BYTES = 256;

interface Watched {
  /** Keyed by the subscription, so a connection's two topics are two watchers. */
  sinks: Map<object, PresenceSink>;
  live: Promise<void>;
  stop: (() => void) | undefined;
}

/**
 * realtime's presence (#13 item 3) over a PresenceStore: memberships of this
 * process's connections, join/leave frames to local watchers (one store
 * subscription per watched topic, one frame per event shared by every
 * watcher), and the one listing every transport answers with. Who may watch
 * or list, and which channels have presence, is decided by the caller with
 * the tenant's channel rules; nothing here is on the path of plain messages.
 */
export class Presence {
  private lastConnId = 0;
  private readonly watched = new Map<string, Watched>();
  private memberships = 0;

  constructor(
    private readonly store: PresenceStore,
    private readonly metrics: RealtimeMetrics,
    private readonly logger: Logger,
    /** False while this instance cannot vouch for its connections (FeedCutoff): events go to nobody. Asked once per event. */
    private readonly serving: () => boolean = () => true,
  ) {}

  /** A membership id for a connection, unique in this process (the store adds the instance). */
  connectionId(): string {
    return (++this.lastConnId).toString(36);
  }

  /** Makes the connection a member; rejects with `unavailable` when the store cannot take it. */
  async join(ref: ChannelRef, connId: string, userId: string, dataJson: string | undefined): Promise<void> {
    await this.store.join(ref, connId, userId, dataJson);
    this.metrics.presenceMemberships.set(++this.memberships);
  }

  /** Ends the membership; the store repairs a removal it could not make (never rejects). */
  leave(ref: ChannelRef, connId: string, wasJoined: boolean): void {
    if (wasJoined) this.metrics.presenceMemberships.set(--this.memberships);
    this.store.leave(ref, connId).catch((err: unknown) => this.logger.debug({ err: (err as Error).message }, 'presence leave failed'));
  }

  /** The sink gets every later join and leave of the topic; resolves once that is live. */
  async watch(topic: string, ref: ChannelRef, key: object, sink: PresenceSink): Promise<void> {
    let entry = this.watched.get(topic);
    if (!entry) {
      const created: Watched = { sinks: new Map(), live: Promise.resolve(), stop: undefined };
      created.live = this.store.subscribe(ref, (e) => this.fanOut(topic, created, e)).then(
        (stop) => {
          created.stop = stop;
          if (this.watched.get(topic) !== created) stop();
        },
        (err: unknown) => {
          if (this.watched.get(topic) === created) this.watched.delete(topic);
          throw err;
        },
      );
      this.watched.set(topic, created);
      entry = created;
    }
    entry.sinks.set(key, sink);
    try {
      await entry.live;
    } catch (err) {
      entry.sinks.delete(key);
      throw err instanceof RelayError ? err : new RelayError('unavailable', 'presence events unavailable', { cause: err });
    }
  }

  unwatch(topic: string, key: object): void {
    const entry = this.watched.get(topic);
    if (!entry || !entry.sinks.delete(key) || entry.sinks.size > 0) return;
    this.watched.delete(topic);
    entry.stop?.();
  }

  /** The channel's members across every instance, sorted by user_id. */
  readonly list = async (ref: ChannelRef): Promise<PresenceMember[]> => {
    const members = await this.store.members(ref);
    return members.sort(byUserId).map(memberJson);
  };

  /** Removes this instance's members at once (leave events), e.g. on SIGTERM. */
  async close(): Promise<void> {
    for (const entry of this.watched.values()) entry.stop?.();
    this.watched.clear();
    await this.store.close();
    this.memberships = 0;
    this.metrics.presenceMemberships.set(0);
  }

  private fanOut(topic: string, entry: Watched, event: PresenceEvent): void {
    this.metrics.presenceEvents.inc({ type: event.type });
    if (entry.sinks.size === 0 || !this.serving()) return;
    const member = event.type === 'join' ? memberJson({ userId: event.userId, dataJson: event.dataJson }) : { user_id: event.userId };
    const frame = JSON.stringify({ type: event.type, topic, member });
    for (const sink of entry.sinks.values()) sink.sendMessage(frame);
  }
}

function byUserId(a: StoredMember, b: StoredMember): number {
  return a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0;
}

function memberJson(m: StoredMember): PresenceMember {
  if (m.dataJson === undefined) return { user_id: m.userId };
  try {
    return { user_id: m.userId, data: JSON.parse(m.dataJson) as unknown };
  } catch {
    // Only realtime writes member data, always valid JSON; a damaged value is left out, not fatal.
    return { user_id: m.userId };
  }
}

/**
 * The subscribe frame's `member`: a JSON object of at most
 * MAX_MEMBER_DATA_BYTES serialized, as its JSON text; undefined when absent
 * (or null); 'invalid' otherwise.
 */
export function memberDataJson(member: unknown): string | undefined | 'invalid' {
  if (member === undefined || member === null) return undefined;
  if (typeof member !== 'object' || Array.isArray(member)) return 'invalid';
  let json: string;
  try {
    json = JSON.stringify(member);
  } catch {
    return 'invalid';
  }
  // Cheap bound first: a string is at most 3 bytes per UTF-16 unit.
  if (json.length > MAX_MEMBER_DATA_BYTES || Buffer.byteLength(json, 'utf8') > MAX_MEMBER_DATA_BYTES) return 'invalid';
  return json;
}
