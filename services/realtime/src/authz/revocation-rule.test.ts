import { randomUUID } from 'node:crypto';
import type { TenantEvent } from '@service-relay/tenant-events';
import { describe, expect, it } from 'vitest';
import { revocationRule, sameHolder, type RevocationSubject, type RevocationVerdict } from './revocation-rule';

describe('revocationRule', () => {
  const user = randomUUID();
  const id = (keyVersion: number, extra: Partial<RevocationSubject> = {}): RevocationSubject => ({ tenantId: 't', userId: user, keyVersion, ...extra });
  const ev = (kind: TenantEvent['kind'], revoked: number[] = [], detail?: Record<string, unknown>): TenantEvent => ({ seq: 1, tenant_id: 't', kind, version: 1, revoked_key_versions: revoked, ...(detail && { detail }) });
  const before = 1_800_000_000;
  // [case, change, identity of a live connection, verdict (undefined: it stays)]; ws/revocation.ts closes `revoked` with 4401, `disconnected` with 4409.
  const cases: Array<[string, TenantEvent, RevocationSubject, RevocationVerdict | undefined]> = [
    ['disabled closes every key version', ev('disabled'), id(7), 'revoked'],
    ['revoked_all closes every key version', ev('revoked_all', [1]), id(2), 'revoked'],
    ['deleted closes every key version', ev('deleted'), id(9), 'revoked'],
    ['deleted naming key versions closes the others too', ev('deleted', [1]), id(2), 'revoked'],
    ['enabled closes nothing', ev('enabled'), id(1), undefined],
    ['created closes nothing', ev('created'), id(1), undefined],
    ['a first rotate (no previous replaced) closes nothing', ev('rotated'), id(1), undefined],
    ['a second rotate closes the removed previous', ev('rotated', [1]), id(1), 'revoked'],
    ['a second rotate keeps the primary it made previous', ev('rotated', [1]), id(2), undefined],
    ['previous_expired closes the expired previous', ev('previous_expired', [2]), id(2), 'revoked'],
    ['previous_expired keeps the primary', ev('previous_expired', [2]), id(3), undefined],
    ['previous_expired without a previous closes nothing', ev('previous_expired'), id(3), undefined],
    ['channel_rules closes nothing', ev('channel_rules'), id(1), undefined],
    ['user_revoked: that user, no iat', ev('user_revoked', [], { user_id: user.toUpperCase(), before }), id(1), 'revoked'],
    ['user_revoked: that user, issued before', ev('user_revoked', [], { user_id: user, before }), id(1, { issuedAt: before - 1 }), 'revoked'],
    ['user_revoked: that user, issued at the moment', ev('user_revoked', [], { user_id: user, before }), id(1, { issuedAt: before }), undefined],
    ['user_revoked: another user', ev('user_revoked', [], { user_id: randomUUID(), before }), id(1), undefined],
    ['user_revoked malformed closes nothing', ev('user_revoked', [], { user_id: user }), id(1), undefined],
    ['user_disconnected: that user', ev('user_disconnected', [], { user_id: user.toUpperCase() }), id(1), 'disconnected'],
    ['user_disconnected: another user', ev('user_disconnected', [], { user_id: randomUUID() }), id(1), undefined],
    ['user_disconnected malformed closes nothing', ev('user_disconnected', [], { user_id: 7 }), id(1), undefined],
  ];
  it.each(cases)('%s', (_name, change, identity, verdict) => {
    expect(revocationRule(change)?.(identity)).toBe(verdict);
  });
});

describe('sameHolder', () => {
  const user = randomUUID();
  const holder: RevocationSubject = { tenantId: 't', userId: user, keyVersion: 1 };
  // [case, the fresh verdict's identity, still the same holder]
  const cases: Array<[string, RevocationSubject, boolean]> = [
    ['the same tenant and user', { ...holder, keyVersion: 2 }, true],
    ['the user id in other case', { ...holder, userId: user.toUpperCase() }, true],
    ['another user', { ...holder, userId: randomUUID() }, false],
    ['another tenant', { ...holder, tenantId: 'u' }, false],
  ];
  it.each(cases)('%s', (_name, next, same) => {
    expect(sameHolder(holder, next)).toBe(same);
  });
});
