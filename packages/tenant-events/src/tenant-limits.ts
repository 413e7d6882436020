/**
 * Per-tenant limits (#30): the names, their bounds and the one parser that
 * the registry (admin input, plans) and realtime (the `limits` feed change)
 * share. A limits document is partial: a name left out takes the layer
 * below (tenant overrides <- plan <- realtime's environment defaults).
 */
export const LIMIT_BOUNDS = {
  /** Open WebSocket connections of the tenant across every realtime instance (MAX_CONNECTIONS_PER_TENANT). */
  max_connections: [1, 10_000_000],
  /** Publishes per second of the tenant, REST + WebSocket + host API, cluster-wide (TENANT_PUBLISH_RATE_PER_S). */
  publish_rate_per_s: [1, 1_000_000],
  /** The tenant's publish bucket: publishes allowed at once after a quiet spell (TENANT_PUBLISH_BURST). */
  publish_burst: [1, 1_000_000],
  /** Publish frames per second per connection (PUBLISH_RATE_PER_S). */
  connection_publish_rate_per_s: [1, 1_000_000],
  /** Per connection bucket (PUBLISH_BURST). */
  connection_publish_burst: [1, 1_000_000],
  /** Channels one connection may subscribe to (MAX_SUBSCRIPTIONS). */
  max_subscriptions: [1, 100_000],
  /** Members of one presence channel (MAX_PRESENCE_MEMBERS). */
  max_presence_members: [1, 1_000_000],
  /** Messages a channel's history keeps (HISTORY_MAX_MESSAGES). */
  history_max_messages: [1, 10_000_000],
  /** Seconds a channel's history keeps a message (HISTORY_TTL_S). */
  history_ttl_s: [1, 365 * 86_400],
  /** Largest `data` of one message, serialized, in bytes; never above the contract's 64 KiB. */
  max_message_bytes: [1, 65_536],
} as const satisfies Record<string, readonly [number, number]>;

export type LimitName = keyof typeof LIMIT_BOUNDS;
export const LIMIT_NAMES = Object.keys(LIMIT_BOUNDS) as LimitName[];
export type TenantLimits = Readonly<Record<LimitName, number>>;
export type PartialLimits = Readonly<Partial<Record<LimitName, number>>>;
/** A PATCH: a name set to null goes back to the layer below. */
export type LimitsPatch = Readonly<Partial<Record<LimitName, number | null>>>;

export function isLimitName(v: string): v is LimitName {
  return Object.prototype.hasOwnProperty.call(LIMIT_BOUNDS, v);
}

/**
 * Reads a limits document: an object of known names to whole numbers within
 * their bounds (`nulls`: null allowed, for a patch). A string says what is
 * wrong, for an `invalid_limits` answer.
 */
export function parseLimits(value: unknown, nulls: true): LimitsPatch | string;
export function parseLimits(value: unknown, nulls?: false): PartialLimits | string;
export function parseLimits(value: unknown, nulls = false): LimitsPatch | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'limits must be a JSON object of limit names to whole numbers';
  const out: Partial<Record<LimitName, number | null>> = {};
  for (const [name, n] of Object.entries(value as Record<string, unknown>)) {
    if (!isLimitName(name)) return `unknown limit "${name.slice(0, 64)}"; known: ${LIMIT_NAMES.join(', ')}`;
    if (n === null && nulls) {
      out[name] = null;
      continue;
    }
    const [min, max] = LIMIT_BOUNDS[name];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min || n > max) return `${name} must be a whole number from ${min} to ${max}${nulls ? ' (or null to unset it)' : ''}`;
    out[name] = n;
  }
  return out;
}

/** Layers in order, later ones winning: e.g. mergeLimits(defaults, plan, overrides). */
export function mergeLimits<T extends PartialLimits>(base: T, ...layers: PartialLimits[]): T {
  const out: Partial<Record<LimitName, number>> = { ...base };
  for (const layer of layers) for (const name of LIMIT_NAMES) if (layer[name] !== undefined) out[name] = layer[name];
  return out as T;
}

/** A patch applied to a document: null removes a name. */
export function patchLimits(doc: PartialLimits, patch: LimitsPatch): PartialLimits {
  const out: Partial<Record<LimitName, number>> = { ...doc };
  for (const name of LIMIT_NAMES) {
    const v = patch[name];
    if (v === null) delete out[name];
    else if (v !== undefined) out[name] = v;
  }
  return out;
}

/** A document in name order (what is stored and sent), without absent names. */
export function canonicalLimits(doc: PartialLimits): PartialLimits {
  const out: Partial<Record<LimitName, number>> = {};
  for (const name of LIMIT_NAMES) if (doc[name] !== undefined) out[name] = doc[name];
  return out;
}

/** Plan names: lowercase, like `free` or `pro-2024`. */
export const PLAN_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
