-- Rotating a tenant's host-sync credential with an overlap (#33 item 2): the
-- old secret's hash stays beside the new one until expire_previous (or the
-- next rotation, or revoke_all), so a host can move to the new secret with
-- no fetch refused. NULL: no previous credential. Expand-only: an older
-- registry ignores the column (and accepts only the current secret).
ALTER TABLE tenants ADD COLUMN previous_host_sync_secret_hash text;
ALTER TABLE tenants DROP CONSTRAINT tenants_tombstone_has_none;
ALTER TABLE tenants ADD CONSTRAINT tenants_tombstone_has_none
  CHECK (deleted_at IS NULL OR (primary_secret IS NULL AND previous_secret IS NULL AND host_sync_secret_hash IS NULL AND previous_host_sync_secret_hash IS NULL));
