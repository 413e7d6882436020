-- Usage metering (#30 item 3). Realtime instances count per tenant in memory
-- and hand the registry one flush every USAGE_FLUSH_INTERVAL_S; each flush
-- carries an id (instance id + sequence) recorded in usage_flushes in the same
-- transaction as its increments, so a flush retried after a lost answer is
-- applied once (Stripe usage records' idempotency keys). No foreign key to
-- tenants: usage may be kept after a tenant is deleted (?keep_usage=true).
CREATE TABLE tenant_usage (
  tenant_id uuid NOT NULL,
  -- The UTC hour the counts belong to (its start).
  hour timestamptz NOT NULL,
  published_rest bigint NOT NULL DEFAULT 0,
  published_ws bigint NOT NULL DEFAULT 0,
  published_host bigint NOT NULL DEFAULT 0,
  deliveries bigint NOT NULL DEFAULT 0,
  bytes_in bigint NOT NULL DEFAULT 0,
  bytes_out bigint NOT NULL DEFAULT 0,
  -- The sum over instances of each one's peak within the hour (tenant_usage_peaks).
  peak_connections bigint NOT NULL DEFAULT 0,
  connection_ms bigint NOT NULL DEFAULT 0,
  -- Every refusal of the hour (by limit in tenant_usage_refusals), for sorting.
  refusals bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, hour)
);
CREATE INDEX tenant_usage_hour ON tenant_usage (hour);

CREATE TABLE tenant_usage_peaks (
  tenant_id uuid NOT NULL,
  hour timestamptz NOT NULL,
  instance_id text NOT NULL,
  peak bigint NOT NULL,
  PRIMARY KEY (tenant_id, hour, instance_id)
);
CREATE INDEX tenant_usage_peaks_hour ON tenant_usage_peaks (hour);

CREATE TABLE tenant_usage_refusals (
  tenant_id uuid NOT NULL,
  hour timestamptz NOT NULL,
  limit_name text NOT NULL,
  count bigint NOT NULL,
  PRIMARY KEY (tenant_id, hour, limit_name)
);
CREATE INDEX tenant_usage_refusals_hour ON tenant_usage_refusals (hour);

-- Flush ids already applied; kept two days (a flush is retried for far less).
CREATE TABLE usage_flushes (
  flush_id text PRIMARY KEY,
  applied_at timestamptz NOT NULL
);
CREATE INDEX usage_flushes_applied_at ON usage_flushes (applied_at);
