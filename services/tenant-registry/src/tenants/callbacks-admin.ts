import type { Logger } from '@service-relay/core';
import { callbackSettingsJson, parseCallbackSettings, type CallbackSettings } from '@service-relay/channels';
import type { CallbacksChange, CallbacksStore, TenantCallbacks } from '../store/callbacks-store';
import type { Propagation, PropagationResult } from './propagation';

export type CallbacksOperation = 'rotate_secret' | 'expire_previous';

/** A committed change and whether it is in force on every consumer; `secret` only when this call made one. */
export interface CallbacksOutcome {
  callbacks: TenantCallbacks;
  secret?: string;
  propagation: PropagationResult;
}

/**
 * Subscribe/publish callbacks (#32 item 4) under the admin guarantee, for
 * the admin API and the host server API alike: the store commits the change
 * with its `callbacks` feed record, then the call waits until every consumer
 * applied it (realtime then asks the registry for the new settings and
 * secrets, and has forgotten every cached answer of the tenant).
 */
export class CallbacksAdmin {
  constructor(
    private readonly store: CallbacksStore,
    private readonly propagation: Propagation,
    private readonly logger: Logger,
    /** CALLBACK_ALLOW_HTTP: plain http beyond loopback. */
    readonly allowHttp: boolean,
    private readonly onPropagated: (confirmed: boolean, seconds: number) => void = () => {},
  ) {}

  /** The settings of a request body, or what is wrong with them. */
  parse(body: unknown): CallbackSettings | string {
    return parseCallbackSettings(body, this.allowHttp);
  }

  get(tenantId: string): Promise<TenantCallbacks | undefined> {
    return this.store.get(tenantId);
  }

  async set(tenantId: string, settings: CallbackSettings): Promise<CallbacksOutcome | undefined> {
    return this.inForce(tenantId, 'set', await this.store.set(tenantId, settings));
  }

  /** Undefined: no such tenant. A tenant without callbacks answers its unchanged view. */
  async remove(tenantId: string): Promise<CallbacksOutcome | undefined> {
    return this.inForce(tenantId, 'removed', await this.store.remove(tenantId));
  }

  /** 'none': the tenant has no callbacks (nothing to rotate or expire). */
  async secret(tenantId: string, op: CallbacksOperation): Promise<CallbacksOutcome | 'none' | undefined> {
    const out = op === 'rotate_secret' ? await this.store.rotateSecret(tenantId) : await this.store.expirePrevious(tenantId);
    if (out === 'none') return out;
    return this.inForce(tenantId, op, out);
  }

  private async inForce(tenantId: string, what: string, out: CallbacksChange | 'none' | undefined): Promise<CallbacksOutcome | undefined> {
    if (out === undefined) return undefined;
    if (out === 'none') {
      const current = await this.store.get(tenantId);
      return current && { callbacks: current, propagation: { confirmed: true, pending: [], waitedMs: 0 } };
    }
    this.logger.info({ tenant_id: tenantId, callbacks_version: out.callbacks.version, change: what, seq: out.event.seq }, 'tenant callbacks changed');
    const result = await this.propagation.awaitAllInForce([{ tenantId, event: out.event }]);
    this.onPropagated(result.confirmed, result.waitedMs / 1000);
    if (!result.confirmed) this.logger.warn({ tenant_id: tenantId, waited_ms: result.waitedMs, pending: result.pending.map((p) => p.consumerId) }, 'callbacks change committed but not confirmed in force everywhere; consumers keep pulling it');
    return { callbacks: out.callbacks, ...(out.secret !== undefined && { secret: out.secret }), propagation: result };
  }
}

/** `{tenant_id, callbacks: {url, subscribe, publish, timeout_ms} | null, version, has_previous_secret}`, plus `signing_secret` when shown (once). */
export function callbacksView(o: { callbacks: TenantCallbacks; secret?: string | undefined }): Record<string, unknown> {
  const c = o.callbacks;
  return {
    tenant_id: c.tenantId,
    callbacks: c.settings && callbackSettingsJson(c.settings),
    version: c.version,
    has_previous_secret: c.hasPreviousSecret,
    ...(o.secret !== undefined && { signing_secret: o.secret }),
  };
}
