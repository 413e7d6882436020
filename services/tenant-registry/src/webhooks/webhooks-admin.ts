import { randomUUID } from 'node:crypto';
import { isIP } from 'node:net';
import { newSigningSecret, type Clock, type Logger } from '@service-relay/core';
import { isWebhookEventType, WEBHOOK_EVENT_TYPES, type WebhookEventType } from '@service-relay/webhook-events';
import type { TenantCrypto } from '../crypto/tenant-crypto';
import type { AttemptRow, EndpointChange, WebhookEndpointRow, WebhookStore } from '../store/webhook-store';
import type { Propagation, PropagationResult } from '../tenants/propagation';

const MAX_URL_CHARS = 2048;
/** A rotation's default overlap: the old secret still signs (beside the new one) this long. */
export const DEFAULT_OVERLAP_S = 86_400;
const MAX_OVERLAP_S = 30 * 86_400;

export type WebhookProblem = { code: 'invalid_webhook'; problem: string };

export interface EndpointWithStatus extends WebhookEndpointRow {
  queued: number;
}

/** Every consumer applied the change (or none was needed). */
const IN_FORCE: PropagationResult = { confirmed: true, pending: [], waitedMs: 0 };

/**
 * Webhook endpoints of a tenant (#32): the one domain behind the admin API,
 * the CLI and the host server API. A secret is returned only by create and
 * rotate; the store keeps it sealed. Create, delete and the on/off switch
 * answer under the admin guarantee: when they change which event types the
 * tenant's enabled endpoints want, the call waits until every realtime
 * instance applied that `webhooks` change (records exactly those from then
 * on), and says whether it did (`propagation`).
 */
export class WebhooksAdmin {
  constructor(
    private readonly store: WebhookStore,
    private readonly crypto: TenantCrypto,
    private readonly clock: Clock,
    /** WEBHOOK_ALLOW_HTTP. */
    private readonly allowHttp: boolean,
    private readonly propagation: Pick<Propagation, 'awaitAllInForce'>,
    private readonly logger: Logger,
    private readonly onPropagated: (confirmed: boolean, seconds: number) => void = () => {},
    /** An endpoint was switched on (this process's sender looks at its queue at once). */
    private readonly onEnabled: () => void = () => {},
  ) {}

  /** `{url, events}`; undefined when the tenant does not exist. */
  async create(tenantId: string, body: unknown): Promise<{ endpoint: EndpointWithStatus; secret: string; propagation: PropagationResult } | WebhookProblem | 'too_many' | undefined> {
    const input = this.parseCreate(body);
    if ('code' in input) return input;
    const endpointId = randomUUID();
    const secret = newSigningSecret();
    const out = await this.store.create({ endpointId, tenantId, url: input.url, events: input.events, secret: this.crypto.sealWebhookSecret(endpointId, secret), now: new Date(this.clock.now()) });
    if (out === undefined || out === 'too_many') return out;
    return { endpoint: { ...out.result, queued: 0 }, secret, propagation: await this.inForce(tenantId, 'created', out) };
  }

  async list(tenantId: string): Promise<EndpointWithStatus[]> {
    const rows = await this.store.list(tenantId);
    return Promise.all(rows.map(async (r) => ({ ...r, queued: await this.store.queuedCount(r.endpointId) })));
  }

  async get(tenantId: string, endpointId: string): Promise<EndpointWithStatus | undefined> {
    const row = await this.store.get(tenantId, endpointId);
    return row && { ...row, queued: await this.store.queuedCount(endpointId) };
  }

  /** Undefined: no such endpoint. */
  async remove(tenantId: string, endpointId: string): Promise<{ propagation: PropagationResult } | undefined> {
    const out = await this.store.remove(tenantId, endpointId);
    return out && { propagation: await this.inForce(tenantId, 'deleted', out) };
  }

  async setEnabled(tenantId: string, endpointId: string, enabled: boolean): Promise<{ endpoint: EndpointWithStatus; propagation: PropagationResult } | undefined> {
    const out = await this.store.setEnabled(tenantId, endpointId, enabled, new Date(this.clock.now()));
    if (!out) return undefined;
    if (enabled) this.onEnabled();
    const propagation = await this.inForce(tenantId, enabled ? 'enabled' : 'disabled', out);
    return { endpoint: { ...out.result, queued: await this.store.queuedCount(endpointId) }, propagation };
  }

  /** Waits for the `webhooks` change, if the write recorded one, to be applied by every consumer. */
  private async inForce(tenantId: string, what: string, out: EndpointChange<unknown>): Promise<PropagationResult> {
    const change = out.change;
    if (!change) return IN_FORCE;
    this.logger.info({ tenant_id: tenantId, webhook_events: change.detail?.webhook_events, change: what, seq: change.seq }, 'tenant webhook events changed');
    const result = await this.propagation.awaitAllInForce([{ tenantId, event: change }]);
    this.onPropagated(result.confirmed, result.waitedMs / 1000);
    if (!result.confirmed) this.logger.warn({ tenant_id: tenantId, waited_ms: result.waitedMs, pending: result.pending.map((p) => p.consumerId) }, 'webhook events change committed but not confirmed in force everywhere; consumers keep pulling it');
    return result;
  }

  /** `{overlap_s?}`: a new secret; the old one keeps signing beside it for the overlap (default a day; 0 ends it now). */
  async rotate(tenantId: string, endpointId: string, body: unknown): Promise<{ endpoint: EndpointWithStatus; secret: string } | WebhookProblem | undefined> {
    let overlapS = DEFAULT_OVERLAP_S;
    if (body !== undefined) {
      const b = body as Record<string, unknown>;
      if (typeof body !== 'object' || body === null || Array.isArray(body) || Object.keys(b).some((k) => k !== 'overlap_s')) return problem('the body is {"overlap_s"?: <seconds>}');
      if (b.overlap_s !== undefined) {
        if (!Number.isInteger(b.overlap_s) || (b.overlap_s as number) < 0 || (b.overlap_s as number) > MAX_OVERLAP_S) return problem(`overlap_s is a whole number of seconds from 0 to ${MAX_OVERLAP_S}`);
        overlapS = b.overlap_s as number;
      }
    }
    const secret = newSigningSecret();
    const now = this.clock.now();
    const row = await this.store.rotateSecret(
      tenantId,
      endpointId,
      (previous) => ({ secret: this.crypto.sealWebhookSecret(endpointId, secret), previous }),
      new Date(now + overlapS * 1000),
      new Date(now),
    );
    return row && { endpoint: { ...row, queued: await this.store.queuedCount(endpointId) }, secret };
  }

  async deliveries(tenantId: string, endpointId: string, limit: number): Promise<{ endpoint: EndpointWithStatus; attempts: AttemptRow[] } | undefined> {
    const endpoint = await this.get(tenantId, endpointId);
    return endpoint && { endpoint, attempts: await this.store.attempts(endpointId, limit) };
  }

  private parseCreate(body: unknown): { url: string; events: WebhookEventType[] } | WebhookProblem {
    const shape = `the body is {"url": "https://…", "events": [${WEBHOOK_EVENT_TYPES.map((t) => `"${t}"`).join(', ')}]}`;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return problem(shape);
    const b = body as Record<string, unknown>;
    const unknown = Object.keys(b).find((k) => k !== 'url' && k !== 'events');
    if (unknown !== undefined) return problem(`unknown field "${unknown.slice(0, 64)}"; ${shape}`);
    const url = checkUrl(b.url, this.allowHttp);
    if (typeof url !== 'string') return url;
    if (!Array.isArray(b.events) || b.events.length === 0 || !b.events.every(isWebhookEventType)) return problem(`events is a non-empty list of ${WEBHOOK_EVENT_TYPES.join(', ')}`);
    return { url, events: [...new Set(b.events as WebhookEventType[])] };
  }
}

/** HTTPS anywhere; plain HTTP to a loopback host, or anywhere with WEBHOOK_ALLOW_HTTP. No credentials in the URL. */
export function checkUrl(value: unknown, allowHttp: boolean): string | WebhookProblem {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_URL_CHARS) return problem(`url is an https:// URL of at most ${MAX_URL_CHARS} characters`);
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return problem('url is not a URL');
  }
  if (u.username !== '' || u.password !== '') return problem('url must not carry credentials');
  if (u.hash !== '') return problem('url must not have a fragment');
  if (u.protocol === 'https:') return u.toString();
  if (u.protocol !== 'http:') return problem('url must be https:// (or http:// to a loopback address)');
  if (allowHttp || isLoopback(u.hostname)) return u.toString();
  return problem('plain http:// is accepted only to a loopback address (127.0.0.0/8, [::1], localhost) unless the operator sets WEBHOOK_ALLOW_HTTP');
}

function isLoopback(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

function problem(text: string): WebhookProblem {
  return { code: 'invalid_webhook', problem: text };
}
