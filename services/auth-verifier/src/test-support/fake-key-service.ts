import * as grpc from '@grpc/grpc-js';
import { randomBytes, randomUUID } from 'node:crypto';
import { bindServer, hasInternalToken, REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE, serviceDefinition, stopServer } from '@service-relay/grpc';
import type { TenantEventBus, TenantEventKind } from '@service-relay/tenant-events';

export interface FakeTenant {
  tenantId: string;
  disabled: boolean;
  version: number;
  primary: { secret: string; keyVersion: number };
  previous?: { secret: string; keyVersion: number } | undefined;
}

/**
 * A stand-in for the registry's KeyService (a real grpc-js server, data from a
 * map) plus the admin mutations that publish tenant events the way the
 * registry does: change first, then publish and wait for the acks.
 */
export class FakeKeyService {
  readonly tenants = new Map<string, FakeTenant>();
  calls = 0;
  /** While set, every call fails with UNAVAILABLE (registry down). */
  down = false;
  private server: grpc.Server | undefined;
  port = 0;

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
        if (!t) return cb(null, { found: false, disabled: false, version: 0 });
        cb(null, {
          found: true,
          disabled: t.disabled,
          version: t.version,
          primary: { secret: t.primary.secret, key_version: t.primary.keyVersion },
          previous: t.previous ? { secret: t.previous.secret, key_version: t.previous.keyVersion } : null,
        });
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
    return this.bus?.publish({ tenant_id: id, kind, version: t.version, revoked_key_versions: revoked(before) });
  }
}

/** 32 random bytes in base64url, as the registry issues secrets. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}
