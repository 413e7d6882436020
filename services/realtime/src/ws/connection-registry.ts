import { isFresh, verifyFresh, type CheckKind, type FeedPositions, type VerifiedIdentity, type VerifierClient, type VerifyResult } from '@service-relay/verifier-client';
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
 * Live connections by tenant, and the freshness rule for the verdicts that
 * admit them (docs/ARCHITECTURE.md "Verdict freshness"): a verdict judged
 * before a change of its tenant that this instance has applied neither opens
 * a connection nor counts as a refresh, so a connection cannot slip in
 * between the verdict and the revocation that should have closed it.
 */
export class ConnectionRegistry {
  private readonly byTenant = new Map<string, Set<TrackedConnection>>();
  private count = 0;

  constructor(
    private readonly verifier: VerifierClient,
    private readonly metrics: RealtimeMetrics,
    /** This instance's tenant feed. */
    private readonly positions: FeedPositions,
    /** Told of every connection that opens and closes (webhook user_connected/disconnected, #32). */
    private readonly users?: { connected(c: object, tenantId: string, userId: string): void; disconnected(c: object, tenantId: string): void },
  ) {}

  add(c: TrackedConnection): void {
    let set = this.byTenant.get(c.identity.tenantId);
    if (!set) {
      set = new Set();
      this.byTenant.set(c.identity.tenantId, set);
      this.metrics.connectedTenants.set(this.byTenant.size);
    }
    set.add(c);
    this.users?.connected(c, c.identity.tenantId, c.identity.userId);
    this.count += 1;
    this.metrics.connections.set(this.count);
  }

  remove(c: TrackedConnection): void {
    const set = this.byTenant.get(c.identity.tenantId);
    if (!set?.delete(c)) return;
    this.users?.disconnected(c, c.identity.tenantId);
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

  /** Open connections per tenant, most first. */
  perTenant(): Array<{ tenantId: string; connections: number }> {
    return [...this.byTenant].map(([tenantId, set]) => ({ tenantId, connections: set.size })).sort((a, b) => b.connections - a.connections || a.tenantId.localeCompare(b.tenantId));
  }

  /** A verdict no older than any change of its tenant applied here; rejects like verify() (and when it cannot get one). */
  verifyFresh(token: string, kind: CheckKind = 'admission'): Promise<VerifyResult> {
    return verifyFresh(this.verifier, this.positions, token, kind);
  }

  /** Still fresh now? Asked synchronously right before a verdict opens a connection or counts as a refresh. */
  isFresh(identity: VerifiedIdentity): boolean {
    return isFresh(identity, this.positions);
  }
}
