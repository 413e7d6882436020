import type { TenantChangeEvent } from './tenant';

export type TenantAction = 'disable' | 'enable' | 'rotate' | 'expire_previous' | 'revoke_all' | 'rotate_host_sync' | 'rotate_host_sync_keep_previous' | 'expire_previous_host_sync';

/**
 * What the admin rules read and write of a tenant. Secrets are opaque here
 * (sealed JWT secrets, the host-sync hash): the rules only move them between
 * slots or take fresh ones from `FreshSecrets`.
 */
export interface TenantState {
  disabled: boolean;
  /** State version: +1 on every change that affects tokens. */
  version: number;
  primaryKeyVersion: number;
  primarySecret: string;
  previousKeyVersion: number | null;
  previousSecret: string | null;
  hostSyncSecretHash: string;
  /** The replaced host-sync secret's hash, accepted beside the current one until expired. */
  previousHostSyncSecretHash: string | null;
}

/** Fresh secrets, made by the caller (crypto stays outside the rules); each called at most once. */
export interface FreshSecrets {
  /** A new JWT secret, sealed for this key version. */
  jwtSecret(keyVersion: number): string;
  /** The hash of a new host-sync secret. */
  hostSyncSecretHash(): string;
}

export interface Transition {
  next: TenantState;
  /** What consumers hear; absent when nothing token-relevant changed (host-sync rotation). */
  event?: TenantChangeEvent;
}

/**
 * The admin actions as pure state changes. Every token-relevant action, even
 * one that changes no slot (a repeated disable, expire_previous without a
 * previous), bumps the version and yields an event: consumers apply it again
 * and close whatever is still open, so a retry repairs instead of doing nothing.
 */
export function applyAction(state: TenantState, action: TenantAction, fresh: FreshSecrets): Transition {
  switch (action) {
    case 'disable':
    case 'enable':
      return tokenChange({ ...state, disabled: action === 'disable' }, action === 'disable' ? 'disabled' : 'enabled', []);
    case 'rotate': {
      // The old primary becomes the previous, replacing (revoking) any previous.
      const keyVersion = state.primaryKeyVersion + 1;
      return tokenChange(
        { ...state, primaryKeyVersion: keyVersion, primarySecret: fresh.jwtSecret(keyVersion), previousKeyVersion: state.primaryKeyVersion, previousSecret: state.primarySecret },
        'rotated',
        state.previousKeyVersion === null ? [] : [state.previousKeyVersion],
      );
    }
    case 'expire_previous':
      if (state.previousKeyVersion === null) return tokenChange(state, 'previous_expired', []);
      return tokenChange({ ...state, previousKeyVersion: null, previousSecret: null }, 'previous_expired', [state.previousKeyVersion]);
    case 'revoke_all': {
      // Incident: a new primary, no previous, and a new host-sync secret (the old one dies).
      const keyVersion = state.primaryKeyVersion + 1;
      const revoked = state.previousKeyVersion === null ? [state.primaryKeyVersion] : [state.primaryKeyVersion, state.previousKeyVersion];
      return tokenChange(
        {
          ...state,
          hostSyncSecretHash: fresh.hostSyncSecretHash(),
          previousHostSyncSecretHash: null,
          primaryKeyVersion: keyVersion,
          primarySecret: fresh.jwtSecret(keyVersion),
          previousKeyVersion: null,
          previousSecret: null,
        },
        'revoked_all',
        revoked,
      );
    }
    // Host-sync changes leave tokens alone, so the state version stays and no consumer is told: the
    // registry reads the credential from the database at every check, so the change is in force at once.
    case 'rotate_host_sync':
      // The old secret dies now (a leak), and so does any previous one.
      return { next: { ...state, hostSyncSecretHash: fresh.hostSyncSecretHash(), previousHostSyncSecretHash: null } };
    case 'rotate_host_sync_keep_previous':
      // The old secret keeps working beside the new one until expire_previous_host_sync (replacing any previous).
      return { next: { ...state, hostSyncSecretHash: fresh.hostSyncSecretHash(), previousHostSyncSecretHash: state.hostSyncSecretHash } };
    case 'expire_previous_host_sync':
      return { next: { ...state, previousHostSyncSecretHash: null } };
  }
}

function tokenChange(next: TenantState, kind: TenantChangeEvent['kind'], revokedKeyVersions: number[]): Transition {
  const version = next.version + 1;
  return { next: { ...next, version }, event: { kind, version, revokedKeyVersions } };
}
