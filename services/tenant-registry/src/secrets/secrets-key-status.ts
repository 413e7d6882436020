import { LEGACY_KEY_ID, type Keyring } from '@service-relay/core';
import type { Queryable } from '../db/db';
import { keyringStore } from './keyring-store';

/** `GET /admin/secrets-key` (docs/API.md "Secrets keyring"). */
export interface SecretsKeyStatus {
  /** The key every registry seals new values with. */
  active_key_id: string;
  /**
   * `activating`: this registry's newest key does not seal yet (`waiting_on`
   * lists the registries that lack it); `reencrypting`: stored values under
   * another key remain, or a registry still seals with another; `done`.
   */
  state: 'activating' | 'reencrypting' | 'done';
  /** Stored sealed values per key id (the host-sync hash key counted as one). */
  secrets: Record<string, number>;
  total: number;
  /** Values re-sealed since the active key was chosen; when the last pass began and when nothing was left. */
  reencryption: { reencrypted: number; started_at: string | null; done_at: string | null };
  /** The key ids of the registry that answered, newest first. */
  configured_key_ids: string[];
  /** Of those: neither active, nor waiting to be, nor sealing anything stored. Each may be removed from SECRETS_KEYS / SECRETS_KEY. */
  removable_key_ids: string[];
  /** Registries lacking the newest key, while activating. */
  waiting_on: string[];
  /** Every registry heard from in the last seconds: its key ids and the key it seals with. */
  registries: Array<{ registry: string; key_ids: string[]; sealing_key_id: string; seen_ms_ago: number }>;
  activated_at: string | null;
}

export async function secretsKeyStatus(q: Queryable, keyring: Keyring, holderExpiryMs: number): Promise<SecretsKeyStatus> {
  const row = await keyringStore.row(q);
  const counts = await keyringStore.counts(q, row);
  const holders = await keyringStore.holders(q, holderExpiryMs);
  const active = row.activeKeyId ?? LEGACY_KEY_ID;
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const activating = keyring.newest !== active && !row.retired.includes(keyring.newest);
  const behind = total - (counts[active] ?? 0) > 0 || holders.some((h) => h.sealing !== active);
  const secrets = Object.fromEntries(Object.entries(counts).sort(([a], [b]) => order(keyring, a) - order(keyring, b) || a.localeCompare(b)));
  return {
    active_key_id: active,
    state: activating ? 'activating' : behind ? 'reencrypting' : 'done',
    secrets,
    total,
    reencryption: {
      reencrypted: row.pass.target === active ? row.pass.reencrypted : 0,
      started_at: row.pass.target === active ? (row.pass.startedAt?.toISOString() ?? null) : null,
      done_at: row.doneAt?.toISOString() ?? null,
    },
    configured_key_ids: [...keyring.ids],
    removable_key_ids: keyring.ids.filter((id) => id !== active && !(activating && id === keyring.newest) && (counts[id] ?? 0) === 0 && !holders.some((h) => h.sealing === id)),
    waiting_on: activating ? holders.filter((h) => !h.keyIds.includes(keyring.newest)).map((h) => h.holder) : [],
    registries: holders.map((h) => ({ registry: h.holder, key_ids: h.keyIds, sealing_key_id: h.sealing, seen_ms_ago: h.seenMsAgo })),
    activated_at: row.activatedAt?.toISOString() ?? null,
  };
}

/** Configured ids in the keyring's order (newest first), others after. */
function order(keyring: Keyring, id: string): number {
  const i = keyring.ids.indexOf(id);
  return i < 0 ? keyring.ids.length : i;
}
