import type { TenantKeysData } from '../token/tenant-keys';

/**
 * The source of truth for a tenant's key material (the registry's KeyService).
 * fetch() rejects with RelayError('unavailable') when it cannot answer.
 */
export interface KeyFetcher {
  fetch(tenantId: string): Promise<TenantKeysData>;
  ready(): Promise<boolean>;
  close(): void;
}
