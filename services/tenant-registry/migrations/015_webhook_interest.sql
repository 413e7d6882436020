-- Webhooks on the tenant feed (issue #32): realtime records a tenant's
-- events only when an enabled endpoint wants them, and learns which through
-- the feed. A change of that set (an endpoint created, deleted, switched on
-- or off) takes the next version and records a `webhooks` change carrying
-- the set, in the transaction of the change. The version only grows, so a
-- consumer can always tell a newer set from an older one; 0 while it never
-- changed (an older registry's endpoints: the set is read from them).
ALTER TABLE tenants ADD COLUMN webhooks_version bigint NOT NULL DEFAULT 0;
