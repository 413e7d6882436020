import { isCanonicalUuid, isUuid } from '@service-relay/core';
import { parseCapability } from '@service-relay/channels';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkCap, checkTenantId, checkUserId } from './token-rules.js';

// token-rules.ts is a copy of the verifier's rules (a published package cannot
// import the workspace's core): both must say yes and no to the same inputs.
describe('the SDK token rules agree with the verifier', () => {
  const capCases: unknown[] = [
    {}, { lobby: ['publish'] }, { 'orders.*': ['subscribe', 'history'] }, { '*': ['subscribe'] }, { 'a*b': ['publish'] }, { 'a**': ['publish'] },
    { lobby: [] }, { lobby: ['read'] }, { lobby: 'publish' }, { lobby: ['publish', 'publish'] }, { lobby: Array(17).fill('publish') }, { lobby: Array(16).fill('publish') },
    { ['x'.repeat(128)]: ['presence'] }, { ['x'.repeat(129)]: ['presence'] }, { 'a b': ['publish'] }, { '': ['publish'] }, { 'é': ['publish'] },
    Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`c${i}`, ['publish']])), Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, ['publish']])),
    [], null, 'lobby', 1, [['lobby', ['publish']]],
  ];

  it('on the cap grammar, case by case and for random claims', () => {
    for (const cap of capCases) expect(checkCap(cap) === undefined, JSON.stringify(cap)).toBe(parseCapability(cap) !== undefined);
    const action = fc.constantFrom('subscribe', 'publish', 'history', 'presence', 'read', '', 'Publish');
    const pattern = fc.oneof(fc.stringMatching(/^[A-Za-z0-9_.:*-]{0,6}$/), fc.string({ maxLength: 4 }));
    fc.assert(
      fc.property(fc.dictionary(pattern, fc.oneof(fc.array(action, { maxLength: 5 }), fc.anything()), { maxKeys: 5 }), (cap) => {
        expect(checkCap(cap) === undefined).toBe(parseCapability(cap) !== undefined);
      }),
      { numRuns: 500 },
    );
  });

  it('on user ids and tenant ids', () => {
    const ids = ['0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', '0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D', 'alice', '', '0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d', '{0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d}', 42, null];
    for (const id of ids) {
      expect(checkUserId(id) === undefined, String(id)).toBe(isUuid(id));
      expect(checkTenantId(id) === undefined, String(id)).toBe(isCanonicalUuid(id));
    }
  });
});
