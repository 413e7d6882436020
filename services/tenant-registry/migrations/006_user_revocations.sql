-- User-level token revocations (issue #13): a host's revoke_tokens says
-- "this user's tokens issued before `before` no longer verify". One row per
-- (tenant, user), keeping the latest moment asked for; the verifier loads a
-- tenant's rows with its keys (GetTenantKeys), so a verifier that starts
-- later or loses its cache still knows them. `user_id` is lowercase (user ids
-- compare case-insensitively). Rows whose `before` is older than the
-- retention are pruned hourly (docs/ARCHITECTURE.md "Host server API").
CREATE TABLE user_revocations (
  tenant_id uuid NOT NULL REFERENCES tenants (tenant_id),
  user_id text NOT NULL,
  -- Unix seconds: tokens of this user whose `iat` is absent or earlier are rejected.
  before bigint NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, user_id)
);

CREATE INDEX user_revocations_before ON user_revocations (before);
