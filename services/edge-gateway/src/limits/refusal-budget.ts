import { createHash } from 'node:crypto';
import { clockedLru, type Clock } from '@service-relay/core';
import type { LRUCache } from 'lru-cache';

export interface RefusalBudgetOptions {
  /** Refused credentials one client address may cause per minute, sustained (the bucket's refill rate). */
  perMinute: number;
  /** How many it may cause at once (the bucket's size). */
  burst: number;
  clock: Clock;
  /** Addresses tracked at once (LRU): past it the least recently refused is forgotten, which only ever lets more through. */
  maxAddresses?: number;
  /** How long a tenant or a host credential stays "recently served" (default 10 minutes). */
  servedTtlMs?: number;
  /** Tenants and host credentials remembered as served (LRU). */
  maxServed?: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * Per client address, the refused credentials it caused (401s for bearer
 * tokens, 401s and 429s for host-sync Basic credentials), in a token bucket:
 * `burst` at once, then `perMinute` spread over the minute. (Fixed windows
 * let every address spend its whole budget at each window's start: a flood
 * from many addresses reached the verifier in a burst every minute.)
 * Past the budget the gateway answers `429 rate_limited` itself instead of
 * asking the verifier or the registry, except for what it has recently seen
 * succeed: a tenant some valid token of it was verified for (its fresh
 * tokens are still judged, so a valid client behind the same address keeps
 * working), a host credential the registry answered 2xx for. Everything else
 * an over-budget address sends is answered the same `429`, so the answer
 * does not tell which tenants exist.
 */
export class RefusalBudget {
  readonly limit: number;
  private readonly perMs: number;
  private readonly buckets: LRUCache<string, Bucket>;
  private readonly tenants: LRUCache<string, true>;
  private readonly credentials: LRUCache<string, true>;

  constructor(private readonly opts: RefusalBudgetOptions) {
    if (!(opts.perMinute >= 1) || !(opts.burst >= 1)) throw new Error('RefusalBudget: perMinute and burst must be at least 1');
    this.limit = opts.perMinute;
    this.perMs = opts.perMinute / 60_000;
    this.buckets = clockedLru(opts.maxAddresses ?? 100_000, opts.clock);
    const served = { ttl: opts.servedTtlMs ?? 600_000, updateAgeOnGet: false };
    this.tenants = clockedLru(opts.maxServed ?? 100_000, opts.clock, served);
    this.credentials = clockedLru(opts.maxServed ?? 100_000, opts.clock, served);
  }

  /** Whole seconds until the address may cause another refusal, when it has none left; undefined while it has. */
  exhausted(address: string): number | undefined {
    if (this.buckets.size === 0) return undefined;
    const b = this.buckets.get(budgetKey(address));
    if (b === undefined) return undefined;
    const tokens = this.refill(b);
    return tokens >= 1 ? undefined : Math.max(1, Math.ceil((1 - tokens) / this.perMs / 1000));
  }

  /** One refused credential from `address`. */
  refused(address: string): void {
    const key = budgetKey(address);
    const b = this.buckets.get(key);
    const tokens = Math.max(0, (b === undefined ? this.opts.burst : this.refill(b)) - 1);
    // Forgotten once it would be full again: an absent address has its whole burst.
    this.buckets.set(key, { tokens, at: this.opts.clock.now() }, { ttl: Math.ceil((this.opts.burst - tokens) / this.perMs) });
  }

  private refill(b: Bucket): number {
    return Math.min(this.opts.burst, b.tokens + (this.opts.clock.now() - b.at) * this.perMs);
  }

  tenantServed(tenantId: string): void {
    this.tenants.set(tenantId, true);
  }

  /** Whether the tenant a bearer token names (unverified) had a valid token verified recently. */
  tokenOfServedTenant(token: string): boolean {
    const tenant = tenantOfToken(token);
    return tenant !== undefined && this.tenants.has(tenant);
  }

  credentialServed(tenantSegment: string, authorization: string): void {
    this.credentials.set(credentialKey(tenantSegment, authorization), true);
  }

  credentialWasServed(tenantSegment: string, authorization: string): boolean {
    return this.credentials.has(credentialKey(tenantSegment, authorization));
  }
}

/**
 * What one client is: an IPv4 address (IPv4-mapped IPv6 included), or an
 * IPv6 address's /64, the block one subscriber or host is usually given,
 * so hopping through its addresses does not buy a fresh budget each time.
 */
export function budgetKey(address: string): string {
  if (!address.includes(':')) return address;
  const bare = address.split('%')[0]!.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = bare.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** Never the credential itself in memory longer than the request: a digest of tenant and header. */
function credentialKey(tenantSegment: string, authorization: string): string {
  return createHash('sha256').update(tenantSegment).update('\0').update(authorization).digest('base64');
}

/**
 * The tenant a compact JWS names in its header's `kid` (the contract makes
 * it equal to `tenant_id`), read without verifying anything: only used to
 * decide whether a token is worth the verifier's time.
 */
export function tenantOfToken(token: string): string | undefined {
  const dot = token.indexOf('.');
  if (dot <= 0 || dot > 512) return undefined;
  try {
    const header = JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8')) as { kid?: unknown };
    return typeof header?.kid === 'string' ? header.kid : undefined;
  } catch {
    return undefined;
  }
}
