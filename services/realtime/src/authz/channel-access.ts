import { DEFAULT_CHANNEL_RULES, patternMatches, tenantAllows, type ChannelAction, type ChannelCapability, type ChannelRules } from '@service-relay/channels';

export type ChannelAccess = 'allow' | 'deny';

/** `user:<user_id>`: one user's private channel. */
export const USER_CHANNEL_PREFIX = 'user:';
/** `dm:<a>:<b>[:<c>]`: the private channel of the users it names, ids sorted (lowercased), each once. */
export const DM_CHANNEL_PREFIX = 'dm:';

const UUID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

/**
 * The one channel-authorization decision (issue #13), for every transport:
 * WebSocket subscribe and publish, REST publish and history. Pure.
 *
 * - `user:` and `dm:` channels are private: only the users they name, for
 *   every action, whatever the cap says; a malformed name under those
 *   prefixes is nobody's. No host round trip.
 * - The tenant's rules (operator-set; DEFAULT_CHANNEL_RULES allow every
 *   action) must allow the action on the channel (its most specific rule, else
 *   the rules' default).
 * - Without a cap (`undefined`) that is all.
 * - With a cap, some pattern must also match the channel (exactly, or by the
 *   prefix before a trailing `*`) and list the action. A cap narrows what the
 *   rules and the private-channel rule allow, never widens it.
 */
export function channelAccess(
  rules: ChannelRules,
  cap: ChannelCapability | undefined,
  userId: string,
  channel: string,
  action: ChannelAction,
): ChannelAccess {
  if (!privateRuleAllows(userId, channel)) return 'deny';
  if (!tenantAllows(rules, channel, action)) return 'deny';
  if (cap === undefined) return 'allow';
  for (const grant of cap) {
    if (patternMatches(grant.pattern, channel) && grant.actions.includes(action)) return 'allow';
  }
  return 'deny';
}

export { DEFAULT_CHANNEL_RULES };

/** True for every channel that is not private, and for a private one that names `userId`. */
function privateRuleAllows(userId: string, channel: string): boolean {
  const me = userId.toLowerCase();
  if (channel.startsWith(USER_CHANNEL_PREFIX)) {
    const owner = channel.slice(USER_CHANNEL_PREFIX.length);
    return UUID.test(owner) && owner.toLowerCase() === me;
  }
  if (channel.startsWith(DM_CHANNEL_PREFIX)) {
    const members = channel.slice(DM_CHANNEL_PREFIX.length).split(':');
    if (members.length < 2 || !members.every((m) => UUID.test(m))) return false;
    const lower = members.map((m) => m.toLowerCase());
    // One name per set of users: strictly increasing, so sorted and without repeats.
    for (let i = 1; i < lower.length; i++) if (lower[i - 1]! >= lower[i]!) return false;
    return lower.includes(me);
  }
  return true;
}
