import { describe, expect, it } from 'vitest';
import { applyAction, type FreshSecrets, type TenantAction, type TenantState, type Transition } from './tenant-rules';

/** Fresh secrets are named after what asked for them, so the table can say where each went. */
const fresh: FreshSecrets = { jwtSecret: (v) => `jwt-v${v}`, hostSyncSecretHash: () => 'new-hs-hash' };

const withPrevious: TenantState = {
  disabled: false,
  version: 7,
  primaryKeyVersion: 3,
  primarySecret: 'sealed-3',
  previousKeyVersion: 2,
  previousSecret: 'sealed-2',
  hostSyncSecretHash: 'hs-hash',
  previousHostSyncSecretHash: null,
};
const noPrevious: TenantState = { ...withPrevious, previousKeyVersion: null, previousSecret: null };
const disabled: TenantState = { ...noPrevious, disabled: true };
const hostOverlap: TenantState = { ...withPrevious, previousHostSyncSecretHash: 'older-hs-hash' };

const cases: Array<[string, TenantState, TenantAction, Transition]> = [
  ['disable', noPrevious, 'disable', { next: { ...noPrevious, disabled: true, version: 8 }, event: { kind: 'disabled', version: 8, revokedKeyVersions: [] } }],
  // A repeat is still a change: it bumps the version and re-propagates.
  ['disable again', disabled, 'disable', { next: { ...disabled, version: 8 }, event: { kind: 'disabled', version: 8, revokedKeyVersions: [] } }],
  ['enable', disabled, 'enable', { next: { ...disabled, disabled: false, version: 8 }, event: { kind: 'enabled', version: 8, revokedKeyVersions: [] } }],
  ['enable again', noPrevious, 'enable', { next: { ...noPrevious, version: 8 }, event: { kind: 'enabled', version: 8, revokedKeyVersions: [] } }],
  [
    'rotate without a previous',
    noPrevious,
    'rotate',
    {
      next: { ...noPrevious, version: 8, primaryKeyVersion: 4, primarySecret: 'jwt-v4', previousKeyVersion: 3, previousSecret: 'sealed-3' },
      event: { kind: 'rotated', version: 8, revokedKeyVersions: [] },
    },
  ],
  [
    'rotate revokes the previous it replaces',
    withPrevious,
    'rotate',
    {
      next: { ...withPrevious, version: 8, primaryKeyVersion: 4, primarySecret: 'jwt-v4', previousKeyVersion: 3, previousSecret: 'sealed-3' },
      event: { kind: 'rotated', version: 8, revokedKeyVersions: [2] },
    },
  ],
  [
    'expire_previous',
    withPrevious,
    'expire_previous',
    { next: { ...withPrevious, version: 8, previousKeyVersion: null, previousSecret: null }, event: { kind: 'previous_expired', version: 8, revokedKeyVersions: [2] } },
  ],
  ['expire_previous without a previous', noPrevious, 'expire_previous', { next: { ...noPrevious, version: 8 }, event: { kind: 'previous_expired', version: 8, revokedKeyVersions: [] } }],
  [
    'revoke_all with a previous',
    withPrevious,
    'revoke_all',
    {
      next: { ...noPrevious, version: 8, primaryKeyVersion: 4, primarySecret: 'jwt-v4', hostSyncSecretHash: 'new-hs-hash' },
      event: { kind: 'revoked_all', version: 8, revokedKeyVersions: [3, 2] },
    },
  ],
  [
    'revoke_all without a previous',
    noPrevious,
    'revoke_all',
    {
      next: { ...noPrevious, version: 8, primaryKeyVersion: 4, primarySecret: 'jwt-v4', hostSyncSecretHash: 'new-hs-hash' },
      event: { kind: 'revoked_all', version: 8, revokedKeyVersions: [3] },
    },
  ],
  [
    'revoke_all keeps a disabled tenant disabled',
    disabled,
    'revoke_all',
    {
      next: { ...disabled, version: 8, primaryKeyVersion: 4, primarySecret: 'jwt-v4', hostSyncSecretHash: 'new-hs-hash' },
      event: { kind: 'revoked_all', version: 8, revokedKeyVersions: [3] },
    },
  ],
  // Not token-relevant: same version, no event.
  ['rotate_host_sync', withPrevious, 'rotate_host_sync', { next: { ...withPrevious, hostSyncSecretHash: 'new-hs-hash' } }],
  // #33: an overlap keeps the replaced secret (only the last one); a plain rotation, expire and revoke_all end it.
  ['rotate_host_sync keeping the previous', withPrevious, 'rotate_host_sync_keep_previous', { next: { ...withPrevious, hostSyncSecretHash: 'new-hs-hash', previousHostSyncSecretHash: 'hs-hash' } }],
  [
    'rotate_host_sync keeping the previous replaces an older previous',
    hostOverlap,
    'rotate_host_sync_keep_previous',
    { next: { ...hostOverlap, hostSyncSecretHash: 'new-hs-hash', previousHostSyncSecretHash: 'hs-hash' } },
  ],
  ['rotate_host_sync ends an overlap', hostOverlap, 'rotate_host_sync', { next: { ...hostOverlap, hostSyncSecretHash: 'new-hs-hash', previousHostSyncSecretHash: null } }],
  ['expire_previous_host_sync', hostOverlap, 'expire_previous_host_sync', { next: { ...hostOverlap, previousHostSyncSecretHash: null } }],
  [
    'revoke_all ends a host-sync overlap',
    hostOverlap,
    'revoke_all',
    {
      next: { ...hostOverlap, version: 8, primaryKeyVersion: 4, primarySecret: 'jwt-v4', previousKeyVersion: null, previousSecret: null, hostSyncSecretHash: 'new-hs-hash', previousHostSyncSecretHash: null },
      event: { kind: 'revoked_all', version: 8, revokedKeyVersions: [3, 2] },
    },
  ],
];

describe('applyAction', () => {
  it.each(cases)('%s', (_name, state, action, expected) => {
    const before = structuredClone(state);
    expect(applyAction(state, action, fresh)).toEqual(expected);
    expect(state).toEqual(before);
  });

  it('asks for fresh secrets only when the action needs them', () => {
    const asked: string[] = [];
    const counting: FreshSecrets = {
      jwtSecret: (v) => (asked.push(`jwt:${v}`), 'x'),
      hostSyncSecretHash: () => (asked.push('hs'), 'y'),
    };
    const actions: TenantAction[] = ['disable', 'enable', 'expire_previous', 'rotate', 'revoke_all', 'rotate_host_sync'];
    for (const a of actions) applyAction(withPrevious, a, counting);
    expect(asked).toEqual(['jwt:4', 'hs', 'jwt:4', 'hs']);
  });
});
