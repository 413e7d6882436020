-- One row per tenant holds both secret slots, so "exactly one primary and at
-- most one previous" is structural rather than something queries must keep.
CREATE TABLE tenants (
  tenant_id uuid PRIMARY KEY,
  host_sync_client_id text NOT NULL UNIQUE,
  -- HMAC-SHA256 (hex) of the host-sync client secret; the secret itself is never stored.
  host_sync_secret_hash text NOT NULL,
  disabled boolean NOT NULL DEFAULT false,
  -- Tenant state version: +1 on every change that affects tokens.
  version integer NOT NULL CHECK (version >= 1),
  -- JWT secrets, AES-256-GCM sealed ("v1." format) with tenant id and key version as associated data.
  primary_key_version integer NOT NULL CHECK (primary_key_version >= 1),
  primary_secret text NOT NULL,
  previous_key_version integer,
  previous_secret text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CHECK ((previous_key_version IS NULL) = (previous_secret IS NULL)),
  CHECK (previous_key_version IS NULL OR previous_key_version < primary_key_version)
);

CREATE INDEX tenants_created_at_tenant_id ON tenants (created_at, tenant_id);
