import { isCanonicalUuid, safeEqual } from '@service-relay/core';
import type { HostSyncHasher } from '../crypto/host-sync-hasher';
import type { TenantStore } from '../store/tenant-store';
import type { HostSyncCredential } from './tenant';

/** A v4 id is never nil, so this row never exists; looking it up costs what a real lookup costs. */
const DUMMY_TENANT_ID = '00000000-0000-0000-0000-000000000000';
const DUMMY_CLIENT_ID = `hs_${'0'.repeat(32)}`;

export interface BasicCredentials {
  clientId: string;
  secret: string;
}

/**
 * The host-sync check. Every failure takes the same path: read the row (or the
 * dummy), hash and compare the presented secret, compare the client id, check
 * the state; only then decide. So an unknown tenant, a malformed id or header,
 * a wrong id or secret and a disabled tenant differ in nothing the caller can
 * see. (The store answers an id it just found missing from its negative cache,
 * without a read; the HTTP gate answers every failure no sooner than
 * FAILURE_FLOOR_MS, so that saved read does not show in the timing either.)
 * Returns the primary JWT secret, or undefined for any failure.
 */
export class HostSyncCheck {
  constructor(
    private readonly store: TenantStore,
    private readonly hasher: HostSyncHasher,
  ) {}

  async fetchPrimary(rawTenantId: string, credentials: BasicCredentials | undefined): Promise<string | undefined> {
    return (await this.fetchPrimaryKey(rawTenantId, credentials))?.secret;
  }

  /** As fetchPrimary, with the primary's key version (for the answer's ETag; never derived from the secret). */
  async fetchPrimaryKey(rawTenantId: string, credentials: BasicCredentials | undefined): Promise<{ secret: string; keyVersion: number } | undefined> {
    const row = await this.check(rawTenantId, credentials);
    return row && { secret: row.openPrimarySecret(), keyVersion: row.primaryKeyVersion };
  }

  /** The same check for the host server API (#13): true when the credential is the tenant's and it is enabled. */
  async authenticate(rawTenantId: string, credentials: BasicCredentials | undefined): Promise<boolean> {
    return (await this.check(rawTenantId, credentials)) !== undefined;
  }

  private async check(rawTenantId: string, credentials: BasicCredentials | undefined): Promise<HostSyncCredential | undefined> {
    const wellFormed = isCanonicalUuid(rawTenantId) && credentials !== undefined;
    const row = await this.store.findHostSyncCredential(wellFormed ? rawTenantId : DUMMY_TENANT_ID);
    const presented = credentials?.secret ?? '';
    // Both slots are always compared (the previous against the dummy when there is none), so the timing tells nothing.
    const currentOk = this.hasher.matches(presented, row?.secretHash ?? this.hasher.dummyHash);
    const previous = row?.previousSecretHash ?? null;
    const previousOk = this.hasher.matches(presented, previous ?? this.hasher.dummyHash) && previous !== null;
    const secretOk = currentOk || previousOk;
    const clientOk = safeEqual(credentials?.clientId ?? '', row?.hostSyncClientId ?? DUMMY_CLIENT_ID);
    const enabled = row !== undefined && !row.disabled;
    // Every comparison above has run whatever the case; only now is the outcome decided.
    if (!wellFormed || !row || !secretOk || !clientOk || !enabled) return undefined;
    return row;
  }
}
