-- Webhooks (issue #32). An endpoint is one URL of one tenant and the events
-- it wants; its signing secrets are sealed with SECRETS_KEY. Deliveries are
-- the durable queue per endpoint: one row per (endpoint, event), written by
-- the sender when it takes events from realtime's stream and deleted once
-- the endpoint answered 2xx (or the event is given up). Attempts are the
-- endpoint's delivery log (the last 100 are kept).
CREATE TABLE webhook_endpoints (
  endpoint_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES tenants (tenant_id),
  url text NOT NULL,
  events jsonb NOT NULL,
  enabled boolean NOT NULL,
  secret text NOT NULL,
  previous_secret text,
  previous_expires_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  failures integer NOT NULL DEFAULT 0,
  failing_since timestamptz,
  next_attempt_at timestamptz
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id);

CREATE TABLE webhook_deliveries (
  seq bigserial PRIMARY KEY,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (endpoint_id) ON DELETE CASCADE,
  tenant_id uuid NOT NULL,
  event_id uuid NOT NULL,
  event jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, seq);

CREATE TABLE webhook_attempts (
  attempt_id bigserial PRIMARY KEY,
  endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (endpoint_id) ON DELETE CASCADE,
  tenant_id uuid NOT NULL,
  attempted_at timestamptz NOT NULL,
  events integer NOT NULL,
  first_event_id uuid,
  status integer,
  error text,
  latency_ms integer NOT NULL,
  next_attempt_at timestamptz
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, attempt_id);

-- The sender's place in realtime's event stream, moved in the transaction that stores what it read.
CREATE TABLE webhook_stream_position (
  id integer PRIMARY KEY CHECK (id = 1),
  last_id text NOT NULL
);

-- One registry replica sends at a time (per-endpoint order).
CREATE TABLE webhook_sender_lease (
  id integer PRIMARY KEY CHECK (id = 1),
  holder text NOT NULL,
  until timestamptz NOT NULL
);
