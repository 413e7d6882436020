import { randomUUID } from 'node:crypto';
import { clockedLru, setUntil, signedHeaders, systemClock, type Clock, type Logger } from '@service-relay/core';
import { callbackApplies, callbackUrlProblem, capabilityJson, type CallbackAction } from '@service-relay/channels';
import type { TenantEvent } from '@service-relay/tenant-events';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import type { RealtimeMetrics } from '../metrics';
import { memberDataJson } from '../presence/presence';
import type { CallbackTransport } from './callback-client';
import type { CallbackSettingsCache, TenantCallbacks } from './callback-settings-cache';
import { readCallbackAnswer } from './callback-answer';

/** What a request gets: allowed (with the host's presence member data, when it gave some), or refused with its code. */
export type CallbackVerdict = { allow: true; member?: string } | { allow: false; code: 'forbidden_channel' | 'callback_unavailable' };

const ALLOW: CallbackVerdict = Object.freeze({ allow: true });
const DENY: CallbackVerdict = Object.freeze({ allow: false, code: 'forbidden_channel' });
const UNAVAILABLE: CallbackVerdict = Object.freeze({ allow: false, code: 'callback_unavailable' });

/** The identity fields a callback carries (what realtime holds on both transports). */
export type CallbackIdentity = Pick<VerifiedIdentity, 'tenantId' | 'userId' | 'expiresAt' | 'cap'>;

export interface CallbackDeciderOptions {
  settings: CallbackSettingsCache;
  transport: CallbackTransport;
  metrics: RealtimeMetrics;
  logger: Logger;
  /** CALLBACK_ALLOW_HTTP: plain http beyond loopback. */
  allowHttp: boolean;
  /** CALLBACK_CACHE_MAX_TTL_S: the longest an answer is reused, whatever TTL the host asks for. */
  maxTtlS: number;
  /** CALLBACK_CACHE_MAX_ENTRIES. */
  maxEntries: number;
  clock?: Clock;
}

/**
 * Asks the host before a subscribe or a publish on a channel its tenant's
 * callbacks name (#32 item 4; docs/PROTOCOL.md "Callbacks"). Called only
 * after the channel rules and the token's `cap` allowed the request, so a
 * host can only narrow what they allow. No answer within the tenant's
 * timeout, an error status or an unreadable answer is `callback_unavailable`,
 * never an allow. Answers with a `ttl_s` are reused per tenant, user,
 * channel and action for that long (capped by the operator), from a bounded
 * LRU; any tenant feed change of the tenant forgets its answers (a new
 * generation in the key: O(1), old entries age out).
 */
export class CallbackDecider {
  private readonly answers;
  private readonly inflight = new Map<string, Promise<CallbackVerdict>>();
  private readonly generations = new Map<string, number>();
  private resets = 0;
  private readonly clock: Clock;

  constructor(private readonly opts: CallbackDeciderOptions) {
    this.clock = opts.clock ?? systemClock;
    this.answers = clockedLru<string, CallbackVerdict>(opts.maxEntries, this.clock);
  }

  /** Synchronous when no callback applies or a cached answer decides (the hot path); a promise when the host is asked. */
  decide(identity: CallbackIdentity, channel: string, action: CallbackAction, transport: 'ws' | 'rest'): CallbackVerdict | Promise<CallbackVerdict> {
    const held = this.opts.settings.lookup(identity.tenantId);
    if (held instanceof Promise) return held.then((c) => this.withSettings(c, identity, channel, action, transport));
    return this.withSettings(held, identity, channel, action, transport);
  }

  /** A tenant feed change: whatever it is (callbacks, secrets, revocations, deletion), the tenant's cached answers are forgotten. */
  onEvent(event: TenantEvent): void {
    this.generations.set(event.tenant_id, (this.generations.get(event.tenant_id) ?? 0) + 1);
  }

  onReset(): void {
    this.resets += 1;
    this.answers.clear();
    this.generations.clear();
  }

  private withSettings(c: TenantCallbacks | null, identity: CallbackIdentity, channel: string, action: CallbackAction, transport: 'ws' | 'rest'): CallbackVerdict | Promise<CallbackVerdict> {
    if (!c || !callbackApplies(c.settings, channel, action)) return ALLOW;
    const key = `${identity.tenantId}\u0000${this.resets}.${this.generations.get(identity.tenantId) ?? 0}\u0000${identity.userId.toLowerCase()}\u0000${action}\u0000${channel}`;
    const hit = this.answers.get(key);
    if (hit) {
      this.opts.metrics.callbacks.inc({ action, outcome: hit.allow ? 'cached_allow' : 'cached_deny' });
      return hit;
    }
    // The same question already on its way (a client subscribing twice at once): one request to the host.
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.ask(c, identity, channel, action, transport, key).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return pending;
  }

  private async ask(c: TenantCallbacks, identity: CallbackIdentity, channel: string, action: CallbackAction, transport: 'ws' | 'rest', key: string): Promise<CallbackVerdict> {
    const { settings, secrets } = c;
    const log = { tenant_id: identity.tenantId, action };
    const urlProblem = callbackUrlProblem(settings.url, this.opts.allowHttp);
    if (urlProblem) {
      this.opts.logger.warn({ ...log, problem: urlProblem }, 'callback URL not allowed here (CALLBACK_ALLOW_HTTP); refusing');
      return this.count(action, 'unavailable', UNAVAILABLE);
    }
    const nowS = Math.floor(this.clock.now() / 1000);
    const body = JSON.stringify({
      type: action,
      tenant_id: identity.tenantId,
      user_id: identity.userId,
      channel,
      transport,
      claims: {
        tenant_id: identity.tenantId,
        user_id: identity.userId,
        exp: identity.expiresAt,
        ...(identity.cap !== undefined && { cap: JSON.parse(capabilityJson(identity.cap)) as unknown }),
      },
    });
    const started = performance.now();
    let answer;
    try {
      const res = await this.opts.transport.post(settings.url, { ...signedHeaders(secrets, `cb_${randomUUID()}`, nowS, body) }, body, settings.timeoutMs);
      answer = res.status === 200 ? readCallbackAnswer(res.body) : `status ${res.status}`;
    } catch (err) {
      answer = (err as Error).name === 'TimeoutError' ? `no answer within ${settings.timeoutMs} ms` : (err as Error).message;
    } finally {
      this.opts.metrics.callbackLatency.observe((performance.now() - started) / 1000);
    }
    if (typeof answer === 'string') {
      this.opts.logger.warn({ ...log, problem: answer.slice(0, 200) }, 'callback failed; refusing with callback_unavailable');
      return this.count(action, 'unavailable', UNAVAILABLE);
    }
    let verdict: CallbackVerdict = answer.allow ? ALLOW : DENY;
    if (answer.allow && answer.presence !== undefined && action === 'subscribe') {
      const member = memberDataJson(answer.presence);
      if (member !== 'invalid' && member !== undefined) verdict = { allow: true, member };
    }
    const ttlS = Math.min(answer.ttlS, this.opts.maxTtlS);
    if (ttlS > 0) setUntil(this.answers, key, verdict, this.clock.now() + ttlS * 1000);
    return this.count(action, verdict.allow ? 'allow' : 'deny', verdict);
  }

  private count(action: CallbackAction, outcome: string, verdict: CallbackVerdict): CallbackVerdict {
    this.opts.metrics.callbacks.inc({ action, outcome });
    return verdict;
  }
}
