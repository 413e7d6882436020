-- The admin audit log (docs/ARCHITECTURE.md "Admin audit log"): one row per
-- admin API call, written before the answer is sent. It holds no secret: the
-- caller is named by which admin token it used and a fingerprint of it
-- ("current:1a2b3c4d"), never by the token; failed authentications are
-- "unauthenticated" and rate-limited before they reach this table.
CREATE TABLE admin_audit_log (
  id bigserial PRIMARY KEY,
  -- The database's clock, so rows from several registry replicas compare on one clock.
  at timestamptz NOT NULL DEFAULT now(),
  actor text NOT NULL,
  -- The admin route's name (create, list, get, disable, revoke_all, audit, …) or "unknown".
  action text NOT NULL,
  method text NOT NULL,
  tenant_id uuid,
  status smallint NOT NULL,
  -- The error code of the answer (tenant_not_found, change_not_propagated, …); NULL on success.
  error text,
  request_id text NOT NULL,
  client_address text,
  -- Failed authentications not written (over the rate limit) since the previous "unauthenticated" row.
  suppressed integer NOT NULL DEFAULT 0 CHECK (suppressed >= 0)
);

CREATE INDEX admin_audit_log_tenant_id ON admin_audit_log (tenant_id, id) WHERE tenant_id IS NOT NULL;
CREATE INDEX admin_audit_log_at ON admin_audit_log (at);
