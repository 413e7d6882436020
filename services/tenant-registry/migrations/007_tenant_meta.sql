-- A tenant's display name and labels (#30): what an operator names and sorts
-- tenants by. Never token-relevant: changing them records no feed change.
ALTER TABLE tenants ADD COLUMN name text;
ALTER TABLE tenants ADD COLUMN labels jsonb NOT NULL DEFAULT '{}'::jsonb;
-- The list's label filter is containment (labels @> '{"plan":"pro"}').
CREATE INDEX tenants_labels ON tenants USING gin (labels jsonb_path_ops);
