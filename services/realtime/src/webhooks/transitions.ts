import type { Logger, RedisSettings } from '@service-relay/core';
import type { WebhookEventSink } from '@service-relay/webhook-events';
import type { ChannelRef } from '../messaging/message';
import { createPresenceStore, webhookEventsPossible } from '../presence/create-presence-store';
import type { PresenceStore, PresenceWebhooks } from '../presence/presence-store';
import type { Scheduler } from '../timers/scheduler';

/** Occupancy's one "user": a channel is occupied while any instance has it as a member. */
const OCCUPANT = 'occupied';
/** The users' store keeps one "channel" per tenant; not a channel name (`~` is outside CHANNEL_NAME). */
const CONNECTIONS = '~connections';

export const MEMBER_EVENTS: PresenceWebhooks = { names: { join: 'member_added', leave: 'member_removed' }, withChannel: true, withUser: true };
const OCCUPANCY_EVENTS: PresenceWebhooks = { names: { join: 'channel_occupied', leave: 'channel_vacated' }, withChannel: true, withUser: false };
const CONNECTION_EVENTS: PresenceWebhooks = { names: { join: 'user_connected', leave: 'user_disconnected' }, withChannel: false, withUser: true };

export interface TransitionOptions {
  ttlMs: number;
  scheduler: Scheduler;
  logger: Logger;
  /** The embedded default's hand-over to the registry's sender (no Redis). */
  sink: WebhookEventSink | undefined;
  /** Whether a tenant wants an event recorded (WebhookInterest); absent: every event. */
  wants?: PresenceWebhooks['wants'];
}

/**
 * Detects channel_occupied/vacated and user_connected/disconnected (#32)
 * cluster-wide, with the presence store's machinery: occupancy is a presence
 * store whose members are instances (this instance joins a channel when its
 * first local subscriber arrives, leaves after its last), users' connections
 * one whose channel is the tenant. The store's scripts change the count and
 * append the event in one step, so two instances racing produce one event,
 * and a dead instance's share is swept within the presence bound.
 * Store calls are not awaited by subscribers or connections: an event that
 * could not be recorded (Redis down) is lost and logged, never a refusal.
 * The counts are kept for every tenant; an event is recorded only when the
 * tenant wants it (`wants`), so an endpoint added later gets correct
 * vacated/removed/disconnected events for what was already there.
 */
export class WebhookTransitions {
  private readonly occupancy: PresenceStore;
  private readonly users: PresenceStore;
  private lastConn = 0;
  private readonly connIds = new WeakMap<object, string>();
  private leaving: Array<[tenantId: string, connId: string]> = [];
  private leaveSoon: NodeJS.Immediate | undefined;

  constructor(
    redis: Readonly<RedisSettings>,
    private readonly opts: TransitionOptions,
  ) {
    const common = { ttlMs: opts.ttlMs, scheduler: opts.scheduler, logger: opts.logger };
    const wants = opts.wants && { wants: opts.wants };
    this.occupancy = createPresenceStore(redis, { ...common, keyPrefix: 'wh-occupancy:', webhooks: { ...OCCUPANCY_EVENTS, ...wants, sink: opts.sink } });
    this.users = createPresenceStore(redis, { ...common, keyPrefix: 'wh-users:', webhooks: { ...CONNECTION_EVENTS, ...wants, sink: opts.sink } });
  }

  /** The member events' settings for the presence store, or none when webhook events are off or impossible here. */
  static memberEvents(
    redis: Readonly<RedisSettings>,
    enabled: boolean,
    sink: WebhookEventSink | undefined,
    wants: PresenceWebhooks['wants'],
  ): (PresenceWebhooks & { sink: WebhookEventSink | undefined }) | undefined {
    if (!WebhookTransitions.detects(redis, enabled, sink)) return undefined;
    return { ...MEMBER_EVENTS, ...(wants && { wants }), sink };
  }

  /** Whether this instance detects webhook events at all: WEBHOOK_EVENTS on, not on a Redis Cluster, and somewhere to put them. */
  static detects(redis: Readonly<RedisSettings>, enabled: boolean, sink: WebhookEventSink | undefined): boolean {
    return enabled && webhookEventsPossible(redis) && (redis.url !== undefined || sink !== undefined);
  }

  /** This instance's first local subscriber of the channel. */
  readonly occupied = (ref: ChannelRef): void => {
    this.occupancy.join(ref, 'hub', OCCUPANT, undefined).catch((err: unknown) => this.failed(err));
  };

  /** Its last local subscriber left. */
  readonly vacated = (ref: ChannelRef): void => {
    void this.occupancy.leave(ref, 'hub');
  };

  readonly connected = (conn: object, tenantId: string, userId: string): void => {
    const id = (++this.lastConn).toString(36);
    this.connIds.set(conn, id);
    this.users.join({ tenantId, channel: CONNECTIONS }, id, userId, undefined).catch((err: unknown) => this.failed(err));
  };

  readonly disconnected = (conn: object, tenantId: string): void => {
    const id = this.connIds.get(conn);
    if (id === undefined) return;
    this.connIds.delete(conn);
    this.leaving.push([tenantId, id]);
    this.leaveSoon ??= setImmediate(() => this.leaveNow());
  };

  /**
   * The users' store leaves of the connections closed in this turn, run after
   * the turn's I/O: a disable that closes 10,000 connections in one loop
   * sends their close frames and FINs first (bench/README.md "Scale of one
   * instance"). The event is recorded the same, a turn later.
   */
  private leaveNow(): void {
    if (this.leaveSoon) clearImmediate(this.leaveSoon);
    const leaving = this.leaving;
    this.leaving = [];
    this.leaveSoon = undefined;
    for (const [tenantId, id] of leaving) void this.users.leave({ tenantId, channel: CONNECTIONS }, id);
  }

  async purgeTenant(tenantId: string): Promise<void> {
    // The deleted tenant's connections were closed just before (Revocation): their leaves go first, as without the deferral.
    this.leaveNow();
    await Promise.all([this.occupancy.purgeTenant(tenantId), this.users.purgeTenant(tenantId)]);
  }

  /** Every share of this instance leaves (their events recorded), as at a clean stop. */
  async close(): Promise<void> {
    this.leaveNow();
    await Promise.all([this.occupancy.close(), this.users.close()]);
  }

  private failed(err: unknown): void {
    this.opts.logger.warn({ err: (err as Error).message }, 'webhooks: an occupancy or connection change was not recorded');
  }
}
