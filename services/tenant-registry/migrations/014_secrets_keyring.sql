-- SECRETS_KEY becomes a keyring (#33 item 2; docs/OPERATIONS.md "Rotating
-- SECRETS_KEY"). A sealed value names the key that sealed it in its own
-- text (`v2.<key id>.…`; `v1.…` is the legacy key k0, SECRETS_KEY), so no
-- secret column changes. Expand-only: an older registry ignores both tables
-- and keeps working as long as only k0 seals (see OPERATIONS for which
-- versions may run together).

-- One row: which key seals new values (NULL: not chosen yet, k0), the keys
-- that sealed before it (never chosen again), the host-sync hash key once
-- it is no longer derived from k0 (sealed under the keyring), and the
-- background re-encryption: its lease (one replica at a time, the
-- database's clock) and its position (resumable after a restart).
CREATE TABLE secrets_keyring (
  id integer PRIMARY KEY CHECK (id = 1),
  active_key_id text,
  retired_key_ids jsonb NOT NULL DEFAULT '[]',
  activated_at timestamptz,
  host_sync_hash_key text,
  lease_holder text,
  lease_until timestamptz,
  -- The pass under way: the key it seals under, the table it is in and the
  -- last primary key it finished (NULL table: no pass under way).
  pass_target text,
  pass_table text,
  pass_after text,
  pass_started_at timestamptz,
  pass_reencrypted bigint NOT NULL DEFAULT 0,
  done_at timestamptz
);
INSERT INTO secrets_keyring (id) VALUES (1);

-- One row per running registry: the key ids it has and the one it seals
-- with. A newer key seals only once every registry seen within the last
-- seconds has it.
CREATE TABLE secrets_key_holders (
  holder text PRIMARY KEY,
  key_ids jsonb NOT NULL,
  sealing_key_id text NOT NULL,
  seen_at timestamptz NOT NULL
);
