-- Deleting a tenant (#30): the row stays as a tombstone so the id (and its
-- host-sync client id) is never handed out again, but everything secret or
-- descriptive in it is destroyed: the sealed JWT secrets, the host-sync hash,
-- the name and labels. A tombstone is a row with deleted_at set; every read
-- of a live tenant skips it. The tenant's own rows elsewhere (channel rules,
-- user revocations, and usage once it exists) are deleted in the same
-- transaction (src/store/tenant-deletion.ts, PURGE_STEPS).
ALTER TABLE tenants ADD COLUMN deleted_at timestamptz;
ALTER TABLE tenants ALTER COLUMN primary_secret DROP NOT NULL;
ALTER TABLE tenants ALTER COLUMN host_sync_secret_hash DROP NOT NULL;
ALTER TABLE tenants ADD CONSTRAINT tenants_live_has_secrets
  CHECK (deleted_at IS NOT NULL OR (primary_secret IS NOT NULL AND host_sync_secret_hash IS NOT NULL));
ALTER TABLE tenants ADD CONSTRAINT tenants_tombstone_has_none
  CHECK (deleted_at IS NULL OR (primary_secret IS NULL AND previous_secret IS NULL AND host_sync_secret_hash IS NULL));
