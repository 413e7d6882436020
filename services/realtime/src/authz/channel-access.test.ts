import { DEFAULT_CHANNEL_RULES, parseCapability, parseChannelRules, presenceEnabled, type ChannelRules } from '@service-relay/channels';
import { describe, expect, it } from 'vitest';
import { ACCESS_CASES, PRESENCE_CASES, type RulesDoc } from './channel-access.cases';
import { channelAccess } from './channel-access';

const rulesOf = (doc: RulesDoc | undefined): ChannelRules => {
  if (doc === undefined) return DEFAULT_CHANNEL_RULES;
  const parsed = parseChannelRules(doc);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
};

describe('channelAccess: the channel-authorization table', () => {
  it('covers every kind of rule with both verdicts, with and without tenant rules', () => {
    expect(new Set(ACCESS_CASES.map((c) => c.name)).size).toBe(ACCESS_CASES.length);
    for (const withRules of [false, true]) {
      const rows = ACCESS_CASES.filter((c) => (c.rules !== undefined) === withRules);
      expect(rows.some((c) => c.expected === 'allow')).toBe(true);
      expect(rows.some((c) => c.expected === 'deny')).toBe(true);
    }
  });

  it.each(ACCESS_CASES)('$name → $expected', (c) => {
    const cap = c.cap === undefined ? undefined : parseCapability(c.cap);
    if (c.cap !== undefined) expect(cap).toBeDefined();
    expect(channelAccess(rulesOf(c.rules), cap, c.userId, c.channel, c.action)).toBe(c.expected);
  });

  it.each(PRESENCE_CASES)('presence: $name → $expected', (c) => {
    expect(presenceEnabled(rulesOf(c.rules), c.channel)).toBe(c.expected);
  });
});
