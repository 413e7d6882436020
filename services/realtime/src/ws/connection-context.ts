import type { ErrorCode, Logger } from '@service-relay/core';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import type { CallbackDecider } from '../callbacks/callback-decider';
import type { ChannelRulesLookup } from '../authz/channel-rules-cache';
import type { MessageBus } from '../messaging/message-bus';
import type { RealtimeMetrics } from '../metrics';
import type { Presence } from '../presence/presence';
import type { TenantLimitsView } from '../limits/tenant-limits-cache';
import type { TenantPublishRate } from '../limits/tenant-publish-rate';
import type { TenantRefusals } from '../limits/refusals';
import type { Scheduler } from '../timers/scheduler';
import type { TopicHub } from '../topics/topic-hub';
import type { Ref } from './client-frame';
import type { ConnectionRegistry } from './connection-registry';
import type { TenantUsage, UsageMeter } from '@service-relay/core';
import type { Pingable } from './ping-sweep';
import type { FrameSink } from './subscription';

/** A connection whose socket is not yet closed, as the ping sweep and shutdown see it. */
export interface LiveConnection extends Pingable {
  /** Closes and resolves once the peer answered (or after a grace period, cut hard). */
  shutdown(code: number, graceMs: number): Promise<void>;
}

/** What every connection of a server shares. */
export interface ConnectionContext {
  hub: TopicHub;
  messages: MessageBus;
  registry: ConnectionRegistry;
  scheduler: Scheduler;
  metrics: RealtimeMetrics;
  logger: Logger;
  maxSubscriptions: number;
  maxBufferedBytes: number;
  /** PUBLISH_RATE_PER_S and PUBLISH_BURST; default: unlimited (tests that do not care). */
  publishRate?: { ratePerS: number; burst: number };
  /** AUTH_FRAMES_PER_MINUTE; default: the constant AUTH_FRAMES_PER_MINUTE (ws/token-refresh.ts). */
  authFramesPerMinute?: number;
  /** False while this instance must not take publishes (refused with `unavailable`); default: always true. */
  acceptingPublishes?: () => boolean;
  /**
   * FeedCutoff.serving: false while this instance cannot vouch for its
   * connections, which it then closes (1013); nothing is delivered or acted
   * on meanwhile. Default: always true.
   */
  serving?: () => boolean;
  /** The tenant's channel rules (ChannelRulesCache.lookup); default: the default rules for every tenant. */
  channelRules?: ChannelRulesLookup;
  /** Presence (#13 item 3); absent: no channel has presence here. */
  presence?: Presence;
  /**
   * Per-tenant limits (#30): when given, they decide the publish rate per
   * connection, subscriptions, presence members, largest message and history
   * (and `publishRate`, `maxSubscriptions` are not read); absent: those two only.
   */
  limits?: TenantLimitsView;
  /** The tenant publish rate, cluster-wide (#30); absent: not limited. */
  tenantPublishes?: TenantPublishRate;
  /** Told of every refusal by a limit, with its tenant (usage metering). */
  refusals?: TenantRefusals;
  /** Every connection whose socket is not yet closed (ping and shutdown); each adds and removes itself. */
  live?: Set<LiveConnection>;
  /** Usage metering (#30); absent: nothing is counted. */
  usage?: UsageMeter;
  /** Subscribe/publish callbacks (#32); absent: the host is never asked. */
  callbacks?: CallbackDecider;
}

export const ALWAYS = (): boolean => true;

/** A connection as its frame handlers (channel frames, presence, token refresh) see it. */
export interface FrameConnection extends FrameSink {
  readonly identity: VerifiedIdentity;
  /** The tenant's usage counters while the connection is open (#30); undefined when not metered. */
  readonly usage?: TenantUsage | undefined;
  /** Closed by this side (revoked, expired, dropped): nothing more is acted on or sent. */
  readonly closed: boolean;
  /** ConnectionContext.serving, or always. */
  readonly serving: () => boolean;
  /** A reply frame; it keeps its place after the frames held for this tick. */
  send(text: string): void;
  /** An error frame. */
  error(code: ErrorCode, ref: Ref | undefined, extra?: Record<string, unknown>): void;
  /** An error frame for a refusal by a limit, which names its number (docs/API.md "Limits"). */
  refuse(limit: string, code: ErrorCode, ref: Ref | undefined, extra: { limit: number; retry_after_ms?: number }): void;
  /** A refresh proved a new token of the same holder: it now runs on that one (and its expiry). */
  renew(identity: VerifiedIdentity, token: string): void;
}
