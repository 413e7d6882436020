import { randomBytes } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { HostSyncHasher } from '../crypto/host-sync-hasher';
import type { TenantStore } from '../store/tenant-store';
import type { HostSyncCredential } from './tenant';
import { HostSyncCheck, type BasicCredentials } from './host-sync-check';

const TENANT = '0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4';
const CLIENT = `hs_${'a'.repeat(32)}`;
const SECRET = randomBytes(32).toString('base64url');

function setup(row: Partial<HostSyncCredential> | undefined) {
  const hasher = new HostSyncHasher(randomBytes(32));
  const openPrimarySecret = vi.fn(() => 'the-primary');
  const credential = row && { tenantId: TENANT, hostSyncClientId: CLIENT, secretHash: hasher.hash(SECRET), previousSecretHash: null, disabled: false, openPrimarySecret, ...row };
  const find = vi.fn(async (id: string) => (id === TENANT ? credential : undefined));
  const matches = vi.spyOn(hasher, 'matches');
  const check = new HostSyncCheck({ findHostSyncCredential: find } as unknown as TenantStore, hasher);
  return { check, find, matches, openPrimarySecret };
}

const failures: Array<[string, string, BasicCredentials | undefined, Partial<HostSyncCredential>]> = [
  ['unknown tenant', '5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', { clientId: CLIENT, secret: SECRET }, {}],
  ['malformed tenant id', 'nope', { clientId: CLIENT, secret: SECRET }, {}],
  ['wrong client id', TENANT, { clientId: `hs_${'b'.repeat(32)}`, secret: SECRET }, {}],
  ['wrong secret', TENANT, { clientId: CLIENT, secret: 'wrong' }, {}],
  ['no credentials', TENANT, undefined, {}],
  ['disabled tenant', TENANT, { clientId: CLIENT, secret: SECRET }, { disabled: true }],
];

describe('HostSyncCheck', () => {
  it('returns the primary for the right tenant, client id and secret', async () => {
    const { check } = setup({});
    expect(await check.fetchPrimary(TENANT, { clientId: CLIENT, secret: SECRET })).toBe('the-primary');
  });

  it.each(failures)('refuses %s after one row read and two hash comparisons (current and previous slot), never opening a secret', async (_name, id, creds, row) => {
    const { check, find, matches, openPrimarySecret } = setup(row);
    expect(await check.fetchPrimary(id, creds)).toBeUndefined();
    expect(find).toHaveBeenCalledTimes(1);
    expect(matches).toHaveBeenCalledTimes(2);
    expect(openPrimarySecret).not.toHaveBeenCalled();
  });
});

describe('HostSyncCheck.authenticate (the host server API, #13)', () => {
  it('grants the right credential without opening any secret', async () => {
    const { check, openPrimarySecret } = setup({});
    expect(await check.authenticate(TENANT, { clientId: CLIENT, secret: SECRET })).toBe(true);
    expect(openPrimarySecret).not.toHaveBeenCalled();
  });

  it('accepts the previous secret during an overlap (#33), and costs the same two comparisons whichever slot matches', async () => {
    const OLD = randomBytes(32).toString('base64url');
    const hasher = new HostSyncHasher(randomBytes(32));
    const row = { tenantId: TENANT, hostSyncClientId: CLIENT, secretHash: hasher.hash(SECRET), previousSecretHash: hasher.hash(OLD), disabled: false, primaryKeyVersion: 1, openPrimarySecret: () => 'p' };
    const matches = vi.spyOn(hasher, 'matches');
    const check = new HostSyncCheck({ findHostSyncCredential: async () => row } as unknown as TenantStore, hasher);
    for (const [secret, ok] of [[SECRET, true], [OLD, true], ['wrong', false]] as const) {
      matches.mockClear();
      expect(await check.authenticate(TENANT, { clientId: CLIENT, secret })).toBe(ok);
      expect(matches).toHaveBeenCalledTimes(2);
    }
    // The previous secret with another tenant's client id is refused like any wrong credential.
    expect(await check.authenticate(TENANT, { clientId: `hs_${'b'.repeat(32)}`, secret: OLD })).toBe(false);
  });

  it.each(failures)('refuses %s through the same path as the fetch (one row read, two hash comparisons)', async (_name, id, creds, row) => {
    const { check, find, matches, openPrimarySecret } = setup(row);
    expect(await check.authenticate(id, creds)).toBe(false);
    expect(find).toHaveBeenCalledTimes(1);
    expect(matches).toHaveBeenCalledTimes(2);
    expect(openPrimarySecret).not.toHaveBeenCalled();
  });
});
