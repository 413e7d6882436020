import * as grpc from '@grpc/grpc-js';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  bindServer,
  hasInternalToken,
  REGISTRY_FEED_PROTO,
  REGISTRY_FEED_SERVICE,
  REGISTRY_KEYS_PROTO,
  REGISTRY_KEYS_SERVICE,
  serviceDefinition,
  stopServer,
  type ChangesSinceRequest,
} from '@service-relay/grpc';
import type { TenantEvent, TenantEventBus, TenantEventKind } from '@service-relay/tenant-events';

export interface FakeTenant {
  tenantId: string;
  disabled: boolean;
  version: number;
  primary: { secret: string; keyVersion: number };
  previous?: { secret: string; keyVersion: number } | undefined;
}

/**
 * A stand-in for the registry's KeyService and TenantFeed (a real grpc-js
 * server, data from a map and a change log) plus the admin mutations the way
 * the registry makes them: change first, then announce and wait until every
 * consumer that has asked for changes reports this one applied.
 */
export class FakeKeyService {
  readonly tenants = new Map<string, FakeTenant>();
  calls = 0;
  /** While set, every call fails with UNAVAILABLE (registry down). */
  down = false;
  private server: grpc.Server | undefined;
  port = 0;
  readonly log: TenantEvent[] = [];
  /** Consumer id -> applied sequence, as reported. */
  readonly consumers = new Map<string, number>();

  constructor(
    readonly internalToken: string,
    private readonly bus?: TenantEventBus,
  ) {}

  async start(port = 0): Promise<string> {
    const server = new grpc.Server();
    server.addService(serviceDefinition(REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE), {
      GetTenantKeys: (call: grpc.ServerUnaryCall<{ tenant_id: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        this.calls++;
        if (this.down) return cb({ code: grpc.status.UNAVAILABLE, details: 'down' });
        if (!hasInternalToken(call.metadata, this.internalToken)) return cb({ code: grpc.status.UNAUTHENTICATED, details: 'invalid_internal_token' });
        const t = this.tenants.get(call.request.tenant_id);
        if (!t) return cb(null, { found: false, disabled: false, version: 0, as_of_seq: this.log.length });
        cb(null, {
          as_of_seq: this.log.length,
          found: true,
          disabled: t.disabled,
          version: t.version,
          primary: { secret: t.primary.secret, key_version: t.primary.keyVersion },
          previous: t.previous ? { secret: t.previous.secret, key_version: t.previous.keyVersion } : null,
        });
      },
    });
    server.addService(serviceDefinition(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE), {
      ChangesSince: (call: grpc.ServerUnaryCall<ChangesSinceRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        if (this.down) return cb({ code: grpc.status.UNAVAILABLE, details: 'down' });
        if (!hasInternalToken(call.metadata, this.internalToken)) return cb({ code: grpc.status.UNAUTHENTICATED, details: 'invalid_internal_token' });
        const applied = Number(call.request.applied_seq);
        this.consumers.set(call.request.consumer_id, applied);
        cb(null, { latest_seq: this.log.length, reset: false, changes: applied < 0 ? [] : this.log.slice(applied) });
      },
    });
    this.port = await bindServer(server, `127.0.0.1:${port}`);
    this.server = server;
    return `127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    if (this.server) await stopServer(this.server, 500);
    this.server = undefined;
  }

  create(): FakeTenant {
    const t: FakeTenant = { tenantId: randomUUID(), disabled: false, version: 1, primary: { secret: newSecret(), keyVersion: 1 } };
    this.tenants.set(t.tenantId, t);
    return t;
  }

  disable(id: string) {
    return this.change(id, 'disabled', (t) => (t.disabled = true), () => []);
  }

  enable(id: string) {
    return this.change(id, 'enabled', (t) => (t.disabled = false), () => []);
  }

  rotate(id: string) {
    return this.change(
      id,
      'rotated',
      (t) => {
        t.previous = t.primary;
        t.primary = { secret: newSecret(), keyVersion: t.primary.keyVersion + 1 };
      },
      (before) => (before.previous ? [before.previous.keyVersion] : []),
    );
  }

  expirePrevious(id: string) {
    return this.change(id, 'previous_expired', (t) => (t.previous = undefined), (before) => (before.previous ? [before.previous.keyVersion] : []));
  }

  revokeAll(id: string) {
    return this.change(
      id,
      'revoked_all',
      (t) => {
        t.primary = { secret: newSecret(), keyVersion: t.primary.keyVersion + 1 };
        t.previous = undefined;
      },
      (before) => [before.primary.keyVersion, ...(before.previous ? [before.previous.keyVersion] : [])],
    );
  }

  private async change(id: string, kind: TenantEventKind, apply: (t: FakeTenant) => void, revoked: (before: FakeTenant) => number[]) {
    const t = this.tenants.get(id);
    if (!t) throw new Error(`no tenant ${id}`);
    const before = { ...t };
    apply(t);
    t.version++;
    const seq = this.log.length + 1;
    this.log.push({ seq, tenant_id: id, kind, version: t.version, revoked_key_versions: revoked(before) });
    await this.bus?.notify(seq).catch(() => {});
    // Bounded: a consumer that does not report within 3 s is the test's failure to see.
    for (let i = 0; i < 600 && [...this.consumers.values()].some((a) => a < seq); i++) await new Promise((r) => setTimeout(r, 5));
    const applied = [...this.consumers.values()];
    return { delivered: applied.length, acknowledged: applied.filter((a) => a >= seq).length };
  }
}

/** 32 random bytes in base64url, as the registry issues secrets. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}
