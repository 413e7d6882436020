import type { CliOutput } from './commands';

/** A command line the CLI does not accept (exit 2). */
export class UsageError extends Error {}

/**
 * `delete-tenant ID [--yes] [--keep-usage]`: deletes a tenant for good
 * (DELETE /admin/tenants/{id}). Confirmed first: on a terminal the operator
 * types the tenant id back; elsewhere (a script, a pipe) `--yes` is required.
 */
export async function deleteTenantRequest(args: string[], io: CliOutput): Promise<{ method: string; path: string; tenant: string }> {
  const [id, ...flags] = args;
  if (id === undefined || id.startsWith('--')) throw new UsageError('delete-tenant takes a tenant id, then optionally --yes and --keep-usage');
  let yes = false;
  let keepUsage = false;
  for (const f of flags) {
    if (f === '--yes') yes = true;
    else if (f === '--keep-usage') keepUsage = true;
    else throw new UsageError(`delete-tenant takes --yes and --keep-usage, got ${JSON.stringify(f)}`);
  }
  if (!yes) {
    if (!io.ask) throw new UsageError('delete-tenant asks for confirmation on a terminal; without one, pass --yes');
    io.err(
      `Tenant ${id} will be deleted for good: its secrets are destroyed, its tokens and host-sync credential refused, its live connections closed, ` +
        `and its history, presence, channel rules and user revocations${keepUsage ? '' : ' and usage'} purged. The audit log keeps the record; the id is never reused.`,
    );
    const answer = (await io.ask('Type the tenant id to confirm: ')).trim();
    if (answer !== id) throw new UsageError('not confirmed (the id typed does not match); nothing was deleted');
  }
  io.err(`deleting tenant ${id}: waiting until every instance has closed its connections and purged its data…`);
  return { method: 'DELETE', path: `/admin/tenants/${encodeURIComponent(id)}${keepUsage ? '?keep_usage=true' : ''}`, tenant: id };
}

/** The last line after a confirmed deletion. */
export function deletedMessage(body: unknown): string {
  const b = body as { tenant_id?: unknown; deleted_at?: unknown; usage_kept?: unknown };
  return `deleted tenant ${String(b.tenant_id)} (at ${String(b.deleted_at)}${b.usage_kept === true ? ', usage kept' : ''}): in force on every instance`;
}
