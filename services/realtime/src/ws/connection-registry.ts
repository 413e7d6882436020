import type { CheckKind, VerifiedIdentity, VerifierClient, VerifyResult } from '@service-relay/verifier-client';
import type { RealtimeMetrics } from '../metrics';

/** What the registry and revocation need from a live connection. */
export interface TrackedConnection {
  readonly identity: VerifiedIdentity;
  /** The token the connection currently runs on (kept for re-verification, never logged). */
  readonly token: string;
  close(code: number, reason: string): void;
  /** A re-check of the same token confirmed it (key details may be refreshed). */
  confirm(identity: VerifiedIdentity): void;
}

/**
 * Live connections by tenant, and a revocation epoch: a token verified while
 * a revocation was being applied is checked once more, so a connection cannot
 * slip in between the verdict and the revocation that should have closed it.
 */
export class ConnectionRegistry {
  private readonly byTenant = new Map<string, Set<TrackedConnection>>();
  private count = 0;
  private epoch = 0;

  constructor(
    private readonly verifier: VerifierClient,
    private readonly metrics: RealtimeMetrics,
  ) {}

  add(c: TrackedConnection): void {
    let set = this.byTenant.get(c.identity.tenantId);
    if (!set) {
      set = new Set();
      this.byTenant.set(c.identity.tenantId, set);
      this.metrics.connectedTenants.set(this.byTenant.size);
    }
    set.add(c);
    this.count += 1;
    this.metrics.connections.set(this.count);
  }

  remove(c: TrackedConnection): void {
    const set = this.byTenant.get(c.identity.tenantId);
    if (!set?.delete(c)) return;
    this.count -= 1;
    this.metrics.connections.set(this.count);
    if (set.size === 0) {
      this.byTenant.delete(c.identity.tenantId);
      this.metrics.connectedTenants.set(this.byTenant.size);
    }
  }

  ofTenant(tenantId: string): TrackedConnection[] {
    return [...(this.byTenant.get(tenantId) ?? [])];
  }

  all(): TrackedConnection[] {
    const out: TrackedConnection[] = [];
    for (const set of this.byTenant.values()) out.push(...set);
    return out;
  }

  get size(): number {
    return this.count;
  }

  /** Changes whenever a revocation is applied: a verdict obtained before a change is not proof after it. */
  get revocationEpoch(): number {
    return this.epoch;
  }

  /** Called before a revocation is applied. */
  bumpEpoch(): void {
    this.epoch += 1;
  }

  /** Verifies a token; if a revocation happened during the check, checks again. Rejects like verify(). */
  async verifyFresh(token: string, kind: CheckKind = 'admission'): Promise<VerifyResult> {
    const start = this.epoch;
    const first = await this.verifier.verify(token, kind);
    if (!first.valid || this.epoch === start) return first;
    return this.verifier.verify(token, kind);
  }
}
