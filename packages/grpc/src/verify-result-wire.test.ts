import { parseCapability } from '@service-relay/channels';
import { describe, expect, it } from 'vitest';
import type { VerifiedIdentity } from '@service-relay/verdict';
import { fromWire, toWire } from './verify-result-wire';

const base: VerifiedIdentity = { tenantId: 't', userId: 'u', expiresAt: 10, keySlot: 'previous', keyVersion: 3 };

describe('verify result on the wire', () => {
  it('carries the cap claim as compact canonical JSON and back', () => {
    const cap = parseCapability({ 'orders.*': ['history', 'subscribe'], 'chat:*': ['presence', 'publish'] })!;
    const wire = toWire({ valid: true, identity: { ...base, cap } });
    expect(wire.cap_json).toBe('{"chat:*":["publish","presence"],"orders.*":["subscribe","history"]}');
    expect(fromWire(wire)).toEqual({ valid: true, identity: { ...base, cap } });
  });

  it('an identity without a claim has an empty cap_json and comes back without cap', () => {
    const wire = toWire({ valid: true, identity: base });
    expect(wire.cap_json).toBe('');
    const back = fromWire(wire);
    expect(back).toEqual({ valid: true, identity: base });
    expect(back.valid && 'cap' in back.identity).toBe(false);
    // An older verifier that does not know the field at all.
    const { cap_json: _c, ...older } = wire;
    expect(fromWire(older)).toEqual({ valid: true, identity: base });
  });

  it('fails closed on a cap_json it cannot read', () => {
    expect(fromWire({ ...toWire({ valid: true, identity: base }), cap_json: '{"a":["fly"]}' })).toEqual({ valid: false, reason: 'bad_cap' });
  });
});
