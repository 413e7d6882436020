-- A tenant's channel rules (issue #13): the operator's document in canonical
-- form (packages/channels/src/channel-rules.ts), NULL meaning the default rules.
-- A tenant without a row has the default rules at version 0. `version` only
-- grows (a reset to the default keeps the row with the next version), so a
-- consumer can always tell a newer document from an older one.
CREATE TABLE tenant_channel_rules (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (tenant_id),
  rules jsonb,
  version bigint NOT NULL CHECK (version >= 1),
  updated_at timestamptz NOT NULL
);
