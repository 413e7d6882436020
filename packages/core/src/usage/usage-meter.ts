/**
 * One tenant's counters since the last cut. Hot paths hold this object and
 * add to its fields (no allocation, no lookup per message); a cut reads and
 * zeroes them.
 */
export class TenantUsage {
  publishedRest = 0;
  publishedWs = 0;
  publishedHost = 0;
  deliveries = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** Open connections of the tenant on this instance now, and the most since the last cut. */
  live = 0;
  peak = 0;
  /** Connection time since the last cut, minus the open connections' time before they opened (see UsageMeter.cut). */
  connMs = 0;
  /** Made on the first refusal. */
  refusals: Map<string, number> | undefined = undefined;

  constructor(readonly tenantId: string) {}

  get idle(): boolean {
    return this.live === 0 && this.publishedRest + this.publishedWs + this.publishedHost + this.deliveries + this.bytesIn + this.bytesOut + this.peak + this.connMs === 0 && this.refusals === undefined;
  }
}

export type PublishSource = 'rest' | 'ws' | 'host';

/** One tenant's counts in one UTC hour: what a flush carries. */
export interface UsageRecord {
  tenantId: string;
  hourMs: number;
  publishedRest: number;
  publishedWs: number;
  publishedHost: number;
  deliveries: number;
  bytesIn: number;
  bytesOut: number;
  peakConnections: number;
  connectionMs: number;
  refusals: Record<string, number>;
}

/** What the limits code (and any refusal point) calls: tiny on purpose. */
export interface UsageRecorder {
  refused(tenantId: string, limitName: string): void;
}

export const HOUR_MS = 3_600_000;

/**
 * Per-tenant usage of this instance, counted in memory (#30 item 3). A cut
 * turns the counters since the previous cut into records of the UTC hour the
 * period began in; cuts happen at every flush and at every hour boundary, so
 * a period never spans two hours.
 */
export class UsageMeter implements UsageRecorder {
  private readonly tenants = new Map<string, TenantUsage>();
  private periodStart: number;

  constructor(private readonly now: () => number = Date.now) {
    this.periodStart = now();
  }

  /** The tenant's counters, made on first use. A connection keeps it for its life. */
  tenant(tenantId: string): TenantUsage {
    let t = this.tenants.get(tenantId);
    if (!t) this.tenants.set(tenantId, (t = new TenantUsage(tenantId)));
    return t;
  }

  published(tenantId: string, source: PublishSource, bytes: number): void {
    const t = this.tenant(tenantId);
    if (source === 'ws') t.publishedWs += 1;
    else if (source === 'rest') t.publishedRest += 1;
    else t.publishedHost += 1;
    t.bytesIn += bytes;
  }

  refused(tenantId: string, limitName: string): void {
    const t = this.tenant(tenantId);
    const m = (t.refusals ??= new Map());
    m.set(limitName, (m.get(limitName) ?? 0) + 1);
  }

  /** A connection of the tenant opened; returns the counters it keeps (for deliveries and its close). */
  connected(tenantId: string): TenantUsage {
    const t = this.tenant(tenantId);
    t.live += 1;
    if (t.live > t.peak) t.peak = t.live;
    // Its time counts from now: the cut adds live × period, which covers it from the period's start.
    t.connMs -= this.now() - this.periodStart;
    return t;
  }

  disconnected(t: TenantUsage): void {
    t.live -= 1;
    t.connMs += this.now() - this.periodStart;
  }

  /** Ms until the next UTC hour boundary (when a cut must happen). */
  msToNextHour(): number {
    const now = this.now();
    return HOUR_MS - (now % HOUR_MS);
  }

  /**
   * The counts since the last cut, as records of the hour the period began
   * in; counters restart at zero (the peak at the connections open now).
   * Tenants with nothing open and nothing counted are forgotten.
   */
  cut(): UsageRecord[] {
    const now = this.now();
    const hourMs = this.periodStart - (this.periodStart % HOUR_MS);
    const elapsed = now - this.periodStart;
    this.periodStart = now;
    const out: UsageRecord[] = [];
    for (const [id, t] of this.tenants) {
      const connectionMs = t.connMs + t.live * elapsed;
      if (t.idle && connectionMs === 0) {
        this.tenants.delete(id);
        continue;
      }
      let refusals: Record<string, number> = {};
      if (t.refusals) refusals = Object.fromEntries(t.refusals);
      if (t.publishedRest + t.publishedWs + t.publishedHost + t.deliveries + t.bytesIn + t.bytesOut + t.peak + connectionMs > 0 || t.refusals) {
        out.push({
          tenantId: id,
          hourMs,
          publishedRest: t.publishedRest,
          publishedWs: t.publishedWs,
          publishedHost: t.publishedHost,
          deliveries: t.deliveries,
          bytesIn: t.bytesIn,
          bytesOut: t.bytesOut,
          peakConnections: t.peak,
          connectionMs: Math.max(0, Math.round(connectionMs)),
          refusals,
        });
      }
      t.publishedRest = t.publishedWs = t.publishedHost = t.deliveries = t.bytesIn = t.bytesOut = 0;
      t.connMs = 0;
      t.peak = t.live;
      t.refusals = undefined;
      if (t.live === 0) this.tenants.delete(id);
    }
    return out;
  }

  /** Tenants with counters (open connections or counts since the last cut). */
  get size(): number {
    return this.tenants.size;
  }
}

/** Adds `r` into `into` (same tenant and hour); peaks by max. */
export function mergeRecord(into: UsageRecord, r: UsageRecord): void {
  into.publishedRest += r.publishedRest;
  into.publishedWs += r.publishedWs;
  into.publishedHost += r.publishedHost;
  into.deliveries += r.deliveries;
  into.bytesIn += r.bytesIn;
  into.bytesOut += r.bytesOut;
  into.peakConnections = Math.max(into.peakConnections, r.peakConnections);
  into.connectionMs += r.connectionMs;
  for (const [k, n] of Object.entries(r.refusals)) into.refusals[k] = (into.refusals[k] ?? 0) + n;
}
