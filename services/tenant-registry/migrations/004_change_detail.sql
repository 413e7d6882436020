-- A change may carry a small JSON detail its consumers need to apply it
-- without asking back (issue #13): the new channel rules of a tenant, or the
-- user and moment of a user-level token revocation or disconnect.
ALTER TABLE tenant_changes ADD COLUMN detail jsonb;
