import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { CliConfig } from './config';
import { deletedMessage, deleteTenantRequest, UsageError } from './delete-tenant';
import { callbacksRequest } from './callbacks-commands';
import { limitsPath, planRequest, setLimitsRequest, setPlanRequest } from './limits-commands';
import { webhooksRequest } from './webhook-commands';
import { secretsKeyRequest } from './secrets-key-commands';
import { formatUsage, type UsageFormat } from './usage-format';

export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
  /** Standard input, for `rules set` without a file; absent: there is none. */
  stdin?: { isTTY: boolean; read(): Promise<string> };
  /** Asks the operator a question on the terminal; absent when there is none (then `delete-tenant` needs --yes). */
  ask?: (question: string) => Promise<string>;
}

export interface CliRequest {
  method: string;
  path: string;
  /** The tenant id the command names, for error messages. */
  tenant?: string | undefined;
  /** A JSON body (`rules set`). */
  body?: string;
  /** How a 200's body is printed (default: indented JSON). */
  render?: (body: unknown) => string;
  /** Takes over after a 200 (`secrets-key --wait` polls): prints what it prints, returns the exit code. */
  follow?: (body: unknown) => Promise<number>;
}

interface CommandContext {
  io: CliOutput;
  workDir: string;
  config: CliConfig;
}

interface Command {
  args: string;
  help: string;
  request(args: string[], ctx: CommandContext): CliRequest | Promise<CliRequest>;
  /** A line for standard error after a success (the answer itself goes to standard output). */
  done?: (body: unknown) => string;
}

const tenantPath = (suffix: string) => (args: string[]) => ({ method: 'POST', path: `/admin/tenants/${encodeURIComponent(args[0]!)}${suffix}`, tenant: args[0] });

/** `rotate-host-sync ID [--keep-previous]` (#33: an overlap, as for the JWT secret). */
function rotateHostSyncRequest(args: string[]): CliRequest {
  const [id, ...flags] = args;
  if (id === undefined || id.startsWith('--')) throw new UsageError('rotate-host-sync takes a tenant id, then optionally --keep-previous');
  const keep = flags.length === 1 && flags[0] === '--keep-previous';
  if (flags.length > 0 && !keep) throw new UsageError(`rotate-host-sync takes --keep-previous, got ${JSON.stringify(flags.join(' '))}`);
  return tenantPath(keep ? '/host_sync/rotate?keep_previous=true' : '/host_sync/rotate')(args);
}

export const COMMANDS: Record<string, Command> = {
  'create-tenant': {
    args: '[--name N] [--label K=V]...',
    help: 'create a tenant, optionally named and labelled; prints its host-sync credential (shown once)',
    request: (args) => metaRequest('create-tenant', args, false, { method: 'POST', path: '/admin/tenants' }),
  },
  'update-tenant': {
    args: 'ID [--name N | --clear-name] [--label K=V]... [--unlabel K]...',
    help: "set a tenant's name, add or change labels, remove labels",
    request: (args) => {
      const [id, ...rest] = args;
      if (id === undefined || id.startsWith('--')) throw new UsageError('update-tenant takes a tenant id, then what to change');
      return metaRequest('update-tenant', rest, true, { method: 'PATCH', path: `/admin/tenants/${encodeURIComponent(id)}`, tenant: id });
    },
  },
  'list-tenants': {
    args: '[--label K=V]... [--search Q] [--limit N] [--cursor C]',
    help: 'list tenants, oldest first; only those with every label given, whose name contains Q',
    request: listRequest('list-tenants', '/admin/tenants', { '--limit': 'limit', '--cursor': 'cursor', '--search': 'q', '--label': 'label' }, ['label']),
  },
  'delete-tenant': {
    args: 'ID [--yes] [--keep-usage]',
    help: 'delete a tenant for good (asks to type the id back; --yes without a terminal); --keep-usage keeps its usage rows',
    request: (args, ctx) => deleteTenantRequest(args, ctx.io),
    done: deletedMessage,
  },
  'get-tenant': { args: 'ID', help: 'show one tenant', request: (args) => ({ method: 'GET', path: `/admin/tenants/${encodeURIComponent(args[0]!)}`, tenant: args[0] }) },
  disable: { args: 'ID', help: 'disable a tenant (its tokens and fetches are refused)', request: tenantPath('/disable') },
  enable: { args: 'ID', help: 'enable a disabled tenant', request: tenantPath('/enable') },
  'rotate-secret': { args: 'ID', help: 'new JWT primary; the old primary becomes the previous', request: tenantPath('/jwt_secret/rotate') },
  'expire-previous': { args: 'ID', help: 'stop accepting the previous JWT secret', request: tenantPath('/jwt_secret/expire_previous') },
  'revoke-all': { args: 'ID', help: 'incident: new primary, no previous, new host-sync secret', request: tenantPath('/jwt_secret/revoke_all') },
  'rotate-host-sync': {
    args: 'ID [--keep-previous]',
    help: 'new host-sync client secret (printed once); the old one dies now, or with --keep-previous keeps working until expire-previous-host-sync',
    request: rotateHostSyncRequest,
  },
  'expire-previous-host-sync': { args: 'ID', help: 'stop accepting the host-sync secret a rotate-host-sync --keep-previous replaced', request: tenantPath('/host_sync/expire_previous') },
  rules: {
    args: 'get|set|reset ID [--file F]',
    help: "a tenant's channel rules: show them, set them from a JSON file (or stdin), reset to the default",
    request: rulesRequest,
  },
  callbacks: {
    args: 'get|remove|rotate-secret|expire-previous ID | set ID --url U [--subscribe P]... [--publish P]... [--timeout-ms N]',
    help: "a tenant's subscribe/publish callbacks: the host is asked before a subscribe or publish on channels matching P (the signing secret is printed once)",
    request: callbacksRequest,
  },
  users: {
    args: 'revoke|disconnect ID USER_ID [--before S]',
    help: "one user of a tenant: revoke its tokens issued before S (unix seconds, default now; closes its connections, 4401), or disconnect it (4409)",
    request: usersRequest,
  },
  webhooks: {
    args: 'list|create|get|delete|enable|disable|rotate-secret|deliveries ID [ENDPOINT_ID] [--url U --events E,…] [--overlap S] [--limit N]',
    help: "a tenant's webhook endpoints: create (prints the signing secret once), switch on or off, rotate the secret (the old one signs too for --overlap seconds, default a day), the delivery log",
    request: webhooksRequest,
  },
  'get-limits': { args: 'ID', help: "a tenant's plan, overrides and limits (names not set take realtime's defaults)", request: (args) => ({ method: 'GET', path: limitsPath(args[0]!), tenant: args[0] }) },
  'set-limits': {
    args: 'ID [--set NAME=N]... [--unset NAME]... [--plan P | --no-plan] [--replace]',
    help: "change a tenant's limit overrides (and plan); --replace sets exactly these overrides and plan (none if not given)",
    request: setLimitsRequest,
  },
  'set-plan': { args: 'ID PLAN|--none', help: 'put a tenant on a plan, or on none (its overrides stay)', request: setPlanRequest },
  'list-plans': { args: '', help: 'every plan with its limits and how many tenants are on it', request: () => ({ method: 'GET', path: '/admin/plans' }) },
  'get-plan': { args: 'NAME', help: 'one plan', request: (args) => planRequest('get-plan', 'GET', args) },
  'create-plan': { args: 'NAME [--set NAME=N]...', help: "create a plan (or replace one's limits) with these limits", request: (args) => planRequest('create-plan', 'PUT', args) },
  'update-plan': { args: 'NAME [--set NAME=N]...', help: "replace a plan's limits with these; every tenant on it follows before the answer", request: (args) => planRequest('update-plan', 'PUT', args) },
  'delete-plan': { args: 'NAME', help: 'delete a plan no tenant is on', request: (args) => planRequest('delete-plan', 'DELETE', args) },
  'explain-token': {
    args: 'JWT|-',
    help: 'why a user token is refused (or accepted): reason code, meaning, fix, decoded header and claims; - reads stdin',
    request: explainRequest,
  },
  usage: {
    args: '[ID] [--from T] [--to T] [--granularity hour|day] [--sort S] [--limit N] [--cursor C] [--format table|csv|json]',
    help: "usage per hour or UTC day (T: RFC 3339, default the last 24 h): one tenant's, or every tenant's sorted by S (published, deliveries, bytes_in, bytes_out, peak_connections, connection_minutes, refusals)",
    request: usageRequest,
  },
  'secrets-key': {
    args: '[--wait [--timeout S]]',
    help: 'the keyring: which key seals, stored secrets per key id, keys no longer used; --wait follows the re-encryption until done',
    request: (args, ctx) => secretsKeyRequest(args, ctx.config, ctx.io),
  },
  audit: {
    args: '[--tenant ID] [--limit N] [--cursor C]',
    help: 'the admin audit log, newest first',
    request: listRequest('audit', '/admin/audit', { '--tenant': 'tenant_id', '--limit': 'limit', '--cursor': 'cursor' }),
  },
};

export function usage(): string {
  const rows: Array<[string, string]> = [...Object.entries(COMMANDS).map(([name, c]): [string, string] => [`${name} ${c.args}`.trim(), c.help]), ['help', 'show this text']];
  // Every description starts in the same column, two spaces past the longest synopsis.
  const width = Math.max(...rows.map(([synopsis]) => synopsis.length)) + 2;
  return [
    'usage: npm run admin -- <command> [args]',
    '',
    ...rows.map(([synopsis, help]) => `  ${synopsis.padEnd(width)}${help}`),
    '',
    'REGISTRY_URL (default http://127.0.0.1:8082) is the registry; ADMIN_TOKEN comes from the',
    'environment, else from DATA_DIR/secrets.env (DATA_DIR defaults to ./.data).',
  ].join('\n');
}


/**
 * `--name N`, `--clear-name` (update only), `--label K=V` and `--unlabel K`
 * (update only), repeatable, into the JSON body of a create or an update.
 * The registry judges names and labels; this only shapes the body.
 */
function metaRequest(name: string, args: string[], update: boolean, request: CliRequest): CliRequest {
  const body: { name?: string | null; labels?: Record<string, string | null> } = {};
  for (let i = 0; i < args.length; i++) {
    const flag = args[i]!;
    if (flag === '--clear-name' && update) {
      if (body.name !== undefined) throw new UsageError(`${name}: --name and --clear-name exclude each other`);
      body.name = null;
      continue;
    }
    const value = args[++i];
    if (value === undefined) throw new UsageError(`${name}: ${flag} takes a value`);
    if (flag === '--name') {
      if (body.name !== undefined) throw new UsageError(`${name}: give --name once${update ? ' (or --clear-name)' : ''}`);
      body.name = value;
    } else if (flag === '--label') {
      const eq = value.indexOf('=');
      if (eq <= 0) throw new UsageError(`${name}: --label takes KEY=VALUE, got ${JSON.stringify(value)}`);
      body.labels = { ...body.labels, [value.slice(0, eq)]: value.slice(eq + 1) };
    } else if (flag === '--unlabel' && update) {
      body.labels = { ...body.labels, [value]: null };
    } else {
      throw new UsageError(`${name} takes ${update ? '--name N, --clear-name, --label K=V and --unlabel K' : '--name N and --label K=V'}, got ${JSON.stringify(flag)}`);
    }
  }
  if (update && body.name === undefined && body.labels === undefined) throw new UsageError(`${name} needs something to change: --name, --clear-name, --label or --unlabel`);
  return Object.keys(body).length === 0 ? request : { ...request, body: JSON.stringify(body) };
}

/** A GET with flags as query parameters (`flags` maps each flag to its parameter; those in `repeatable` may come more than once). */
function listRequest(name: string, path: string, flags: Record<string, string>, repeatable: readonly string[] = []) {
  return (args: string[]): CliRequest => {
    const query = new URLSearchParams();
    for (let i = 0; i < args.length; i += 2) {
      const flag = args[i]!;
      const value = args[i + 1];
      const param = Object.hasOwn(flags, flag) ? flags[flag] : undefined;
      if (param === undefined || value === undefined) throw new UsageError(`${name} takes ${Object.keys(flags).join(', ')} with a value each, got ${JSON.stringify(flag)}`);
      if (repeatable.includes(param)) query.append(param, value);
      else query.set(param, value);
    }
    const q = query.toString();
    return { method: 'GET', path: `${path}${q ? `?${q}` : ''}`, tenant: query.get('tenant_id') ?? undefined };
  };
}

/** `usage [ID] [flags]`: GET /admin/tenants/{id}/usage or /admin/usage, printed as a table (default), CSV or JSON. */
function usageRequest(args: string[]): CliRequest {
  const id = args[0] !== undefined && !args[0].startsWith('--') ? args[0] : undefined;
  const rest = id === undefined ? args : args.slice(1);
  const flags: Record<string, string> = { '--from': 'from', '--to': 'to', '--granularity': 'granularity', ...(id === undefined && { '--sort': 'sort', '--limit': 'limit', '--cursor': 'cursor' }) };
  let format: UsageFormat = 'table';
  const passed: string[] = [];
  for (let i = 0; i < rest.length; i += 2) {
    if (rest[i] !== '--format') {
      passed.push(rest[i]!, ...(rest[i + 1] === undefined ? [] : [rest[i + 1]!]));
      continue;
    }
    const f = rest[i + 1];
    if (f !== 'table' && f !== 'csv' && f !== 'json') throw new UsageError('usage --format takes table, csv or json');
    format = f;
  }
  const path = id === undefined ? '/admin/usage' : `/admin/tenants/${encodeURIComponent(id)}/usage`;
  const request = listRequest('usage', path, flags)(passed);
  return { ...request, tenant: id, render: (body) => formatUsage(body, format) };
}

/** `rules get|reset ID`, `rules set ID [--file F]` (F `-` or no --file: standard input, which must not be a terminal). */
async function rulesRequest(args: string[], ctx: CommandContext): Promise<CliRequest> {
  const [sub, id, ...rest] = args;
  if (sub !== 'get' && sub !== 'set' && sub !== 'reset') throw new UsageError('rules takes get, set or reset, then a tenant id');
  if (id === undefined || id.startsWith('--')) throw new UsageError(`rules ${sub} takes a tenant id`);
  const path = `/admin/tenants/${encodeURIComponent(id)}/channel_rules`;
  if (sub !== 'set') {
    if (rest.length !== 0) throw new UsageError(`rules ${sub} takes exactly one tenant id`);
    return { method: sub === 'get' ? 'GET' : 'DELETE', path, tenant: id };
  }
  let file = '-';
  if (rest.length === 2 && rest[0] === '--file') file = rest[1]!;
  else if (rest.length !== 0) throw new UsageError('rules set takes a tenant id and optionally --file F (a JSON rules document; without it, or with F "-", standard input)');
  const body = await readDocument(file, ctx);
  try {
    JSON.parse(body);
  } catch (err) {
    throw new UsageError(`${file === '-' ? 'standard input' : file} is not JSON (${(err as Error).message})`);
  }
  return { method: 'PUT', path, tenant: id, body };
}

/** `users revoke ID USER [--before S]`, `users disconnect ID USER`: the host server API's user actions, by the operator (#13). */
function usersRequest(args: string[]): CliRequest {
  const [sub, id, user, ...rest] = args;
  if (sub !== 'revoke' && sub !== 'disconnect') throw new UsageError('users takes revoke or disconnect, then a tenant id and a user id');
  if (id === undefined || user === undefined || id.startsWith('--') || user.startsWith('--')) throw new UsageError(`users ${sub} takes a tenant id and a user id`);
  const path = `/admin/tenants/${encodeURIComponent(id)}/users/${encodeURIComponent(user)}/${sub === 'revoke' ? 'revoke_tokens' : 'disconnect'}`;
  if (sub === 'disconnect') {
    if (rest.length !== 0) throw new UsageError('users disconnect takes exactly a tenant id and a user id');
    return { method: 'POST', path, tenant: id };
  }
  if (rest.length === 0) return { method: 'POST', path, tenant: id, body: '{}' };
  if (rest.length !== 2 || rest[0] !== '--before' || !/^\d{1,12}$/.test(rest[1]!)) throw new UsageError('users revoke takes optionally --before S (unix seconds, at most now + 60)');
  return { method: 'POST', path, tenant: id, body: JSON.stringify({ issued_before: Number(rest[1]) }) };
}

/** `explain-token JWT`, or `explain-token -` with the token on standard input (kept out of the shell history). */
async function explainRequest(args: string[], ctx: CommandContext): Promise<CliRequest> {
  if (args.length !== 1) throw new UsageError('explain-token takes exactly one token (or - to read it from standard input)');
  let token = args[0]!;
  if (token === '-') {
    const stdin = ctx.io.stdin;
    if (!stdin || stdin.isTTY) throw new UsageError('explain-token - reads the token from standard input (a pipe or a redirect, not a terminal)');
    token = (await stdin.read()).trim();
  }
  return { method: 'POST', path: '/admin/explain_token', body: JSON.stringify({ token }) };
}

/** Bounded like the registry's body limit, so a wrong file fails here and not halfway through an upload. */
const MAX_DOCUMENT_BYTES = 128 * 1024;

async function readDocument(file: string, ctx: CommandContext): Promise<string> {
  let text: string;
  if (file === '-') {
    const stdin = ctx.io.stdin;
    if (!stdin || stdin.isTTY) throw new UsageError('rules set needs --file F, or the document on standard input (a pipe or a redirect, not a terminal)');
    text = await stdin.read();
  } else {
    try {
      text = await readFile(resolve(ctx.workDir, file), 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  if (Buffer.byteLength(text) > MAX_DOCUMENT_BYTES) throw new UsageError(`the rules document is over ${MAX_DOCUMENT_BYTES / 1024} KiB`);
  return text;
}

/**
 * Runs one command; returns the exit code: 0 ok, 1 the registry refused or is
 * unreachable, 2 bad usage, 3 committed but not confirmed in force everywhere.
 */
export async function runAdminCli(argv: string[], config: CliConfig, io: CliOutput): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    (name === undefined ? io.err : io.out)(usage());
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (!command) return usageError(io, `unknown command ${JSON.stringify(name)}`);
  let request: CliRequest;
  try {
    if (command.args === 'ID' && args.length !== 1) throw new UsageError(`${name} takes exactly one tenant id`);
    if (command.args === '' && args.length !== 0) throw new UsageError(`${name} takes no arguments`);
    request = await command.request(args, { io, workDir: config.workDir ?? process.cwd(), config });
  } catch (err) {
    if (err instanceof UsageError) return usageError(io, err.message);
    throw err;
  }
  if (!/^https?:\/\/[^/]/.test(config.registryUrl)) return usageError(io, `REGISTRY_URL must be an http(s) URL, got ${JSON.stringify(config.registryUrl)}`);
  if (config.adminToken === undefined) {
    io.err(`error: ADMIN_TOKEN is not set and ${config.secretsFile} does not exist`);
    return 1;
  }
  let res: Response;
  try {
    res = await fetch(`${config.registryUrl}${request.path}`, {
      method: request.method,
      headers: { authorization: `Bearer ${config.adminToken}`, ...(request.body !== undefined && { 'content-type': 'application/json' }) },
      ...(request.body !== undefined && { body: request.body }),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const detail = cause?.code ?? cause?.message ?? (err as Error).message;
    io.err(`error: cannot reach the tenant registry at ${config.registryUrl} (${detail})`);
    return 1;
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (res.ok && body !== undefined) {
    if (request.follow) return request.follow(body);
    io.out(request.render ? request.render(body) : JSON.stringify(body, null, 2));
    if (command.done) io.err(command.done(body));
    return 0;
  }
  const unconfirmed = body as { errors?: unknown; tenant?: unknown; channel_rules?: unknown; user?: unknown; limits?: unknown; plan?: unknown; callbacks?: unknown; pending_consumers?: Array<{ consumer_id?: unknown }> } | undefined;
  if (res.status === 503 && Array.isArray(unconfirmed?.errors) && unconfirmed.errors[0] === 'change_not_propagated') {
    // Committed: the view (and any new host-sync secret, shown only here) must not be lost.
    io.out(JSON.stringify(unconfirmed.tenant ?? unconfirmed.channel_rules ?? unconfirmed.user ?? unconfirmed.limits ?? unconfirmed.plan ?? unconfirmed.callbacks, null, 2));
    const pending = (unconfirmed.pending_consumers ?? []).map((c) => String(c.consumer_id)).join(', ');
    io.err(
      `warning: the change is committed but not yet confirmed in force everywhere (503 change_not_propagated; waiting on: ${pending || 'unknown'}). ` +
        'Consumers keep pulling it; they trust no cache past their lease. Run the same command again to re-propagate and confirm.',
    );
    return 3;
  }
  io.err(`error: ${describeFailure(res.status, body, request.tenant)}`);
  return 1;
}

function describeFailure(status: number, body: unknown, id: string | undefined): string {
  const codes = (body as { errors?: unknown } | undefined)?.errors;
  const code = Array.isArray(codes) ? codes.join(', ') : undefined;
  switch (code) {
    case 'invalid_admin_token':
      return 'the registry refused the admin token (401 invalid_admin_token); check ADMIN_TOKEN';
    case 'tenant_not_found':
      return `no tenant ${id} (404 tenant_not_found)`;
    case 'invalid_tenant_id':
      return `${JSON.stringify(id)} is not a tenant id (400 invalid_tenant_id)`;
    case 'invalid_tenant_meta':
      return `the registry refused the name or labels (400 invalid_tenant_meta): ${String((body as { problem?: unknown }).problem ?? 'no reason given')}`;
    case 'invalid_limits':
      return `the registry refused the limits (400 invalid_limits): ${String((body as { problem?: unknown }).problem ?? 'no reason given')}`;
    case 'invalid_channel_rules':
      return `the registry refused the rules document (400 invalid_channel_rules): ${String((body as { problem?: unknown }).problem ?? 'no reason given')}`;
    default: {
      const problem = (body as { problem?: unknown } | undefined)?.problem;
      return `the registry answered ${status}${code ? ` ${code}` : ''}${typeof problem === 'string' ? `: ${problem}` : ''}`;
    }
  }
}

function usageError(io: CliOutput, message: string): number {
  io.err(`error: ${message}; run \`npm run admin -- help\``);
  return 2;
}
