/**
 * The optional `cap` claim of a user token (issue #13): which channels a
 * token may use, and for what. Shared by the verifier (which validates it),
 * the verifier client and gateway (which carry it) and realtime (which
 * decides with it). The decision itself lives in realtime's authz/.
 */

export const CHANNEL_ACTIONS = ['subscribe', 'publish', 'history', 'presence'] as const;
export type ChannelAction = (typeof CHANNEL_ACTIONS)[number];

/** At most this many patterns in one claim. */
export const MAX_CAP_PATTERNS = 64;

/** A channel name, optionally ending in `*` (a prefix wildcard over what comes before it). */
export const CAP_PATTERN = /^[A-Za-z0-9_.:-]{1,128}\*?$/;

export interface ChannelGrant {
  /** Without a trailing `*`: an exact channel name. */
  readonly pattern: string;
  readonly actions: readonly ChannelAction[];
}

/** A validated claim: grants sorted by pattern, each action once, in CHANNEL_ACTIONS order. */
export type ChannelCapability = readonly ChannelGrant[];

const isAction = (v: unknown): v is ChannelAction => typeof v === 'string' && (CHANNEL_ACTIONS as readonly string[]).includes(v);

/**
 * The claim's value to its canonical form, or undefined when it breaks a
 * rule: an object (not an array) of 0..64 members, each name a CAP_PATTERN,
 * each value a non-empty array of known actions (duplicates collapse).
 */
export function parseCapability(value: unknown): ChannelCapability | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const names = Object.keys(value);
  if (names.length > MAX_CAP_PATTERNS) return undefined;
  const grants: ChannelGrant[] = [];
  for (const pattern of names) {
    if (!CAP_PATTERN.test(pattern)) return undefined;
    const actions = (value as Record<string, unknown>)[pattern];
    if (!Array.isArray(actions) || actions.length === 0 || actions.length > 16 || !actions.every(isAction)) return undefined;
    grants.push({ pattern, actions: CHANNEL_ACTIONS.filter((a) => actions.includes(a)) });
  }
  grants.sort((x, y) => (x.pattern < y.pattern ? -1 : x.pattern > y.pattern ? 1 : 0));
  return grants;
}

/** Compact canonical JSON (`{"orders.*":["subscribe","history"]}`): the verifier's cap_json and the x-relay-cap header. */
export function capabilityJson(cap: ChannelCapability): string {
  return `{${cap.map((g) => `${JSON.stringify(g.pattern)}:${JSON.stringify(g.actions)}`).join(',')}}`;
}

/** capabilityJson's text back to a capability; undefined when it is not one. */
export function capabilityFromJson(text: string): ChannelCapability | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return parseCapability(value);
}
