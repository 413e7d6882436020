import type { CliOutput, CliRequest } from './commands';
import type { CliConfig } from './config';
import { UsageError } from './delete-tenant';

/** What GET /admin/secrets-key answers (secrets/secrets-key-status.ts), as far as the CLI reads it. */
interface Status {
  active_key_id: string;
  state: string;
  secrets: Record<string, number>;
  total: number;
  removable_key_ids: string[];
  waiting_on: string[];
  configured_key_ids: string[];
}

const POLL_MS = 1000;
const DEFAULT_TIMEOUT_S = 3600;

/**
 * `secrets-key [--wait [--timeout S]]` (#33, docs/OPERATIONS.md "Rotating
 * SECRETS_KEY"): the keyring's state. With --wait it asks again every second
 * until the state is `done`, with a progress line on standard error each time
 * it moved, then prints the final state; past S seconds (default an hour) it
 * exits 1.
 */
export function secretsKeyRequest(args: string[], config: CliConfig, io: CliOutput): CliRequest {
  let wait = false;
  let timeoutS = DEFAULT_TIMEOUT_S;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--wait') wait = true;
    else if (args[i] === '--timeout' && /^\d{1,6}$/.test(args[i + 1] ?? '') && Number(args[i + 1]) > 0) timeoutS = Number(args[++i]);
    else throw new UsageError(`secrets-key takes --wait and --timeout S (whole seconds, with --wait), got ${JSON.stringify(args[i])}`);
  }
  if (!wait && args.includes('--timeout')) throw new UsageError('secrets-key --timeout goes with --wait');
  const request: CliRequest = { method: 'GET', path: '/admin/secrets-key' };
  if (!wait) return request;
  return { ...request, follow: (first) => follow(first as Status, config, io, timeoutS * 1000) };
}

/** The progress line of one state. */
export function progressLine(s: Status): string {
  const under = s.secrets[s.active_key_id] ?? 0;
  const others = Object.entries(s.secrets).filter(([id]) => id !== s.active_key_id).map(([id, n]) => `${id}: ${n}`);
  const share = s.total === 0 ? 100 : Math.floor((under / s.total) * 100);
  if (s.state === 'activating') {
    const newest = s.configured_key_ids[0];
    return `secrets-key: ${newest} seals once every registry has it; waiting on ${s.waiting_on.length === 0 ? 'the next check (within a second)' : s.waiting_on.join(', ')}; ${s.active_key_id} seals meanwhile`;
  }
  return `secrets-key: ${s.state === 'done' ? 'done' : 're-encrypting'} under ${s.active_key_id}: ${under} of ${s.total} secrets (${share}%)${others.length > 0 ? `; left: ${others.join(', ')}` : ''}`;
}

async function follow(first: Status, config: CliConfig, io: CliOutput, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let s = first;
  let said = '';
  for (let i = 0; i < 1_000_000 && s.state !== 'done'; i++) {
    const line = progressLine(s);
    if (line !== said) io.err(line);
    said = line;
    if (Date.now() + POLL_MS > deadline) {
      io.out(JSON.stringify(s, null, 2));
      io.err(`error: not done after ${Math.round(timeoutMs / 1000)} s (state ${s.state}); run it again to keep waiting`);
      return 1;
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
    try {
      const res = await fetch(`${config.registryUrl}/admin/secrets-key`, { headers: { authorization: `Bearer ${config.adminToken ?? ''}` }, signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`answered ${res.status}`);
      s = (await res.json()) as Status;
    } catch (err) {
      io.err(`error: the tenant registry at ${config.registryUrl} ${(err as Error).message.startsWith('answered') ? (err as Error).message : `cannot be reached (${(err as Error).message})`}`);
      return 1;
    }
  }
  io.out(JSON.stringify(s, null, 2));
  const removable = s.removable_key_ids.length === 0 ? '' : `; no longer used: ${s.removable_key_ids.join(', ')} (remove from SECRETS_KEYS / SECRETS_KEY and roll the registries and verifiers)`;
  io.err(`done: every stored secret is sealed under ${s.active_key_id}${removable}`);
  return 0;
}
