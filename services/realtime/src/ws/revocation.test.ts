import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { createLogger, RelayError } from '@service-relay/core';
import { ManualTenantFeed, type TenantEvent } from '@service-relay/tenant-events';
import type { VerifiedIdentity, VerifierClient, VerifyResult } from '@service-relay/verifier-client';
import { createRealtimeMetrics } from '../metrics';
import { ConnectionRegistry, type TrackedConnection } from './connection-registry';
import { Revocation } from './revocation';

class FakeConnection implements TrackedConnection {
  closedWith: number | undefined;
  constructor(
    public identity: VerifiedIdentity,
    readonly token: string,
    private readonly registry: ConnectionRegistry,
  ) {
    registry.add(this);
  }
  close(code: number): void {
    this.closedWith ??= code;
    this.registry.remove(this);
  }
  confirm(identity: VerifiedIdentity): void {
    this.identity = identity;
  }
}

function setup(verdicts: Map<string, VerifyResult | 'unavailable'>) {
  const verifier: VerifierClient = {
    verify: async (token) => {
      const v = verdicts.get(token);
      if (v === 'unavailable') throw new RelayError('auth_unavailable');
      return v ?? { valid: false, reason: 'unknown' };
    },
    ready: async () => true,
    close: () => {},
  };
  const registry = new ConnectionRegistry(verifier, createRealtimeMetrics(), new ManualTenantFeed());
  const revocation = new Revocation(registry, createLogger({ service: 'test', level: 'silent' }));
  const conn = (tenantId: string, keyVersion: number, verdict: 'valid' | 'invalid' | 'unavailable' = 'valid') => {
    const identity: VerifiedIdentity = { tenantId, userId: randomUUID(), expiresAt: 2e9, keySlot: 'primary', keyVersion };
    const token = randomUUID();
    verdicts.set(token, verdict === 'valid' ? { valid: true, identity } : verdict === 'invalid' ? { valid: false, reason: 'x' } : 'unavailable');
    return new FakeConnection(identity, token, registry);
  };
  return { registry, revocation, conn };
}

let seq = 0;
const event = (tenant_id: string, kind: TenantEvent['kind'], version: number, revoked: number[] = []): TenantEvent => ({
  seq: ++seq,
  tenant_id,
  kind,
  version,
  revoked_key_versions: revoked,
});

describe('Revocation', () => {
  it('closes by kind: all for disabled/revoked_all, by removed key version for rotated and previous_expired', async () => {
    const { revocation, conn } = setup(new Map());
    const t = randomUUID();
    const other = conn(randomUUID(), 1);
    const v1 = conn(t, 1);
    const v2 = conn(t, 2);
    const v3 = conn(t, 3);
    // The first rotate keeps 1 as previous: nothing removed, nothing closed.
    await revocation.onEvent(event(t, 'rotated', 2));
    expect([v1.closedWith, v2.closedWith, v3.closedWith]).toEqual([undefined, undefined, undefined]);
    // The second removes 1 (it was the previous) and keeps 2 as previous.
    await revocation.onEvent(event(t, 'rotated', 3, [1]));
    expect([v1.closedWith, v2.closedWith, v3.closedWith]).toEqual([4401, undefined, undefined]);
    await revocation.onEvent(event(t, 'previous_expired', 4, [2]));
    expect([v2.closedWith, v3.closedWith]).toEqual([4401, undefined]);
    await revocation.onEvent(event(t, 'revoked_all', 5, [3]));
    expect(v3.closedWith).toBe(4401);
    expect(other.closedWith).toBeUndefined();
  });

  it('user_disconnected closes every connection of that user with 4409 (case-insensitive), and no one else', async () => {
    const { revocation, conn } = setup(new Map());
    const t = randomUUID();
    const a1 = conn(t, 1);
    const a2 = conn(t, 1);
    a2.identity = { ...a2.identity, userId: a1.identity.userId.toUpperCase() };
    const b = conn(t, 1);
    const elsewhere = conn(randomUUID(), 1);
    elsewhere.identity = { ...elsewhere.identity, userId: a1.identity.userId };
    await revocation.onEvent({ ...event(t, 'user_disconnected', 1), detail: { user_id: a1.identity.userId } });
    expect([a1.closedWith, a2.closedWith, b.closedWith, elsewhere.closedWith]).toEqual([4409, 4409, undefined, undefined]);
  });

  it('user_revoked closes that user’s connections whose token has no iat or an earlier one with 4401', async () => {
    const { revocation, conn } = setup(new Map());
    const t = randomUUID();
    const before = 1_800_000_000;
    const noIat = conn(t, 1);
    const user = noIat.identity.userId;
    const older = conn(t, 1);
    older.identity = { ...older.identity, userId: user, issuedAt: before - 1 };
    const atMoment = conn(t, 1);
    atMoment.identity = { ...atMoment.identity, userId: user, issuedAt: before };
    const newer = conn(t, 1);
    newer.identity = { ...newer.identity, userId: user, issuedAt: before + 10 };
    const otherUser = conn(t, 1);
    await revocation.onEvent({ ...event(t, 'user_revoked', 2), detail: { user_id: user.toUpperCase(), before } });
    expect([noIat.closedWith, older.closedWith, atMoment.closedWith, newer.closedWith, otherUser.closedWith]).toEqual([4401, 4401, undefined, undefined, undefined]);
  });

  it('re-verifies everything on a tenant feed reset: failures close with 4401, an unreachable verifier with 1013', async () => {
    const { revocation, registry, conn } = setup(new Map());
    const t = randomUUID();
    const ok = conn(t, 1);
    const bad = conn(randomUUID(), 1, 'invalid');
    const unknown = conn(t, 1, 'unavailable');
    await revocation.onReset();
    expect([ok.closedWith, bad.closedWith, unknown.closedWith]).toEqual([undefined, 4401, 1013]);
    expect(registry.size).toBe(1);
  });

  it('asks again, with min_seq, when a change of the tenant was applied here while the token was being verified', async () => {
    const asked: Array<number | undefined> = [];
    let release!: () => void;
    const tenantId = randomUUID();
    const identity = (asOfSeq: number): VerifiedIdentity => ({ tenantId, userId: randomUUID(), expiresAt: 2e9, keySlot: 'previous', keyVersion: 1, asOfSeq });
    const gate = new Promise<void>((r) => (release = r));
    const verifier: VerifierClient = {
      verify: async (_token, _kind, minSeq) => {
        asked.push(minSeq);
        if (asked.length === 1) {
          await gate;
          // Judged on the verifier's state before the change (a stalled verifier).
          return { valid: true, identity: identity(4) };
        }
        return { valid: false, reason: 'tenant_disabled' };
      },
      ready: async () => true,
      close: () => {},
    };
    const feed = new ManualTenantFeed();
    const registry = new ConnectionRegistry(verifier, createRealtimeMetrics(), feed);
    const pending = registry.verifyFresh('t');
    await feed.push({ seq: 5, tenant_id: tenantId, kind: 'disabled', version: 2, revoked_key_versions: [] });
    release();
    expect(await pending).toEqual({ valid: false, reason: 'tenant_disabled' });
    expect(asked).toEqual([undefined, 5]);
  });

  it('fails closed (auth_unavailable) when every answer stays older than a change applied here, and accepts one at or after it', async () => {
    const tenantId = randomUUID();
    let asOfSeq = 4;
    const verifier: VerifierClient = {
      verify: async () => ({ valid: true, identity: { tenantId, userId: randomUUID(), expiresAt: 2e9, keySlot: 'primary', keyVersion: 1, asOfSeq } }),
      ready: async () => true,
      close: () => {},
    };
    const feed = new ManualTenantFeed();
    const registry = new ConnectionRegistry(verifier, createRealtimeMetrics(), feed);
    await feed.push({ seq: 5, tenant_id: tenantId, kind: 'rotated', version: 2, revoked_key_versions: [] });
    await expect(registry.verifyFresh('t')).rejects.toMatchObject({ code: 'auth_unavailable' });
    asOfSeq = 5;
    expect(await registry.verifyFresh('t')).toMatchObject({ valid: true });
    // Another tenant's change asks nothing of this one.
    await feed.push({ seq: 9, tenant_id: randomUUID(), kind: 'disabled', version: 2, revoked_key_versions: [] });
    expect(await registry.verifyFresh('t')).toMatchObject({ valid: true });
  });
});
