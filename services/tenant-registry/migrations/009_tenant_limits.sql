-- Plans and per-tenant limits (issue #30). A plan is a named, partial limits
-- document shared by many tenants; a tenant's row names its plan (or none)
-- and its own overrides. Effective limits: realtime's environment defaults
-- <- the plan <- the overrides. `limits_version` only grows, per tenant: it
-- moves on every change of the tenant's plan, overrides, or its plan's
-- document, so a consumer can always tell newer limits from older ones.
CREATE TABLE plans (
  name text PRIMARY KEY,
  limits jsonb NOT NULL,
  version bigint NOT NULL CHECK (version >= 1),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);

CREATE TABLE tenant_limits (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (tenant_id),
  plan text REFERENCES plans (name),
  overrides jsonb NOT NULL,
  limits_version bigint NOT NULL CHECK (limits_version >= 1),
  updated_at timestamptz NOT NULL
);

CREATE INDEX tenant_limits_plan ON tenant_limits (plan) WHERE plan IS NOT NULL;
