-- The tenant feed (docs/ARCHITECTURE.md "Tenant feed"): a transactional outbox
-- of token-relevant tenant changes with one global, gap-free sequence, and the
-- progress every consumer reports.

-- One row. Every change takes its sequence with UPDATE … RETURNING inside the
-- transaction that commits it, so the row lock orders commits by sequence: a
-- snapshot that sees sequence N sees every change up to N.
CREATE TABLE feed_state (
  id smallint PRIMARY KEY CHECK (id = 1),
  seq bigint NOT NULL,
  -- Changes up to this sequence were pruned; a consumer behind it must reset.
  pruned_through bigint NOT NULL DEFAULT 0
);
INSERT INTO feed_state (id, seq) VALUES (1, 0);

CREATE TABLE tenant_changes (
  seq bigint PRIMARY KEY,
  tenant_id uuid NOT NULL,
  kind text NOT NULL,
  version integer NOT NULL,
  revoked_key_versions integer[] NOT NULL DEFAULT '{}',
  committed_at timestamptz NOT NULL DEFAULT now()
);

-- Times are the database's own now(), so every registry replica compares
-- them on one clock.
CREATE TABLE feed_consumers (
  consumer_id text PRIMARY KEY,
  kind text NOT NULL,
  applied_seq bigint NOT NULL,
  lease_ms integer NOT NULL,
  seen_at timestamptz NOT NULL,
  -- The last request at which the consumer had applied everything committed:
  -- its lease cannot outlast current_at + lease_ms.
  current_at timestamptz
);
