-- A tenant's subscribe/publish callbacks (issue #32 item 4): the settings in
-- canonical form (packages/channels/src/callback-config.ts), NULL meaning
-- none; the signing secret sealed with SECRETS_KEY (AEAD, bound to the tenant
-- and its secret version), and the previous one while a rotation overlaps.
-- `version` only grows (a removal keeps the row with the next version), so a
-- consumer can always tell a newer state from an older one.
CREATE TABLE tenant_callbacks (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (tenant_id),
  settings jsonb,
  secret_sealed text,
  secret_version bigint NOT NULL DEFAULT 0,
  previous_secret_sealed text,
  previous_secret_version bigint,
  version bigint NOT NULL CHECK (version >= 1),
  updated_at timestamptz NOT NULL
);
