import { parseCapability } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { ACCESS_CASES } from './channel-access.cases';
import { channelAccess, DEFAULT_CHANNEL_RULES } from './channel-access';

describe('channelAccess: the channel-authorization table', () => {
  it('covers every kind of rule with both verdicts', () => {
    expect(new Set(ACCESS_CASES.map((c) => c.name)).size).toBe(ACCESS_CASES.length);
    expect(ACCESS_CASES.some((c) => c.expected === 'allow')).toBe(true);
    expect(ACCESS_CASES.some((c) => c.expected === 'deny')).toBe(true);
  });

  it.each(ACCESS_CASES)('$name → $expected', (c) => {
    const cap = c.cap === undefined ? undefined : parseCapability(c.cap);
    if (c.cap !== undefined) expect(cap).toBeDefined();
    expect(channelAccess(DEFAULT_CHANNEL_RULES, cap, c.userId, c.channel, c.action)).toBe(c.expected);
  });
});
