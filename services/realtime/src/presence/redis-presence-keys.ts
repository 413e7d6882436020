import type { ChannelRef } from '../messaging/message';
import type { PresenceEvent } from './presence-store';

/**
 * The Redis presence driver's key and channel names (docs/ARCHITECTURE.md
 * "Presence"). A channel's keys share the hash tag `{tenant:channel}`, the
 * instance sets share `{instances}`: every script touches one slot.
 */
export class PresenceKeys {
  readonly instances: string;
  readonly sweeping: string;
  /** What every channel key starts with, before its hash tag `{tenant:channel}`. */
  readonly tenantPrefix: string;

  constructor(private readonly prefix: string) {
    this.instances = `${prefix}presence:{instances}`;
    this.sweeping = `${prefix}presence:{instances}:sweeping`;
    this.tenantPrefix = `${prefix}presence:`;
  }

  /** KEYS of the join, leave and removal scripts: the instance's hash on the channel, users, data. */
  channel(ref: ChannelRef, instance: string): [string, string, string] {
    return [`${this.tagged(ref)}:i:${instance}`, this.users(ref), this.data(ref)];
  }

  users(ref: ChannelRef): string {
    return `${this.tagged(ref)}:users`;
  }

  data(ref: ChannelRef): string {
    return `${this.tagged(ref)}:data`;
  }

  /** The pub/sub channel of a presence channel's join and leave events. */
  events(ref: ChannelRef): string {
    return `${this.prefix}presence-events:${ref.tenantId}:${ref.channel}`;
  }

  /** The channels an instance has members on (`channelKey` entries). */
  instance(id: string): string {
    return `${this.prefix}presence:instance:${id}`;
  }

  private tagged(ref: ChannelRef): string {
    return `${this.tenantPrefix}{${ref.tenantId}:${ref.channel}}`;
  }
}

/** `/` is in neither a tenant id nor a channel name. */
export function channelKey(ref: ChannelRef): string {
  return `${ref.tenantId}/${ref.channel}`;
}

export function membershipKey(ref: ChannelRef, connId: string): string {
  return `${channelKey(ref)}/${connId}`;
}

export function refOf(key: string): ChannelRef | undefined {
  const slash = key.indexOf('/');
  return slash > 0 ? { tenantId: key.slice(0, slash), channel: key.slice(slash + 1) } : undefined;
}

/** An event as the scripts publish it: `j\n<user>\n<1 + data | 0>` or `l\n<user>`; undefined for anything else. */
export function parseEvent(payload: string): PresenceEvent | undefined {
  if (payload.indexOf('\n') !== 1) return undefined;
  if (payload[0] === 'l') return { type: 'leave', userId: payload.slice(2) };
  if (payload[0] !== 'j') return undefined;
  const b = payload.indexOf('\n', 2);
  if (b < 0) return undefined;
  return { type: 'join', userId: payload.slice(2, b), dataJson: payload[b + 1] === '1' ? payload.slice(b + 2) : undefined };
}
