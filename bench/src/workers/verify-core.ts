import { createHmac, timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { systemClock } from '@service-relay/core';
import { buildTenantKeys, TokenChecker } from '@service-relay/auth-verifier';
import { serveWorker } from '../lib/worker-runtime';
import { signToken, type TenantKey } from '../lib/tokens';

/**
 * One process, one core: the verifier's own check (every contract rule plus
 * the HMAC, the key looked up from a prepared entry as its in-process cache
 * hands it over) against the bare physical limit, node:crypto HMAC-SHA256 of
 * the same signing input compared with timingSafeEqual.
 */

type Op = (token: string) => boolean;

let tokens: string[] = [];
let ours: Op = () => false;
let raw: Op = () => false;

function setup({ key, count }: { key: TenantKey; count: number }) {
  // Distinct tokens (one user each), as a verifier sees them.
  tokens = Array.from({ length: count }, () => signToken(key));
  const checker = new TokenChecker({ clock: systemClock, maxLifetimeS: 86_400 });
  const tenant = buildTenantKeys(key.tenantId, { found: true, disabled: false, version: 1, primary: { secret: key.secret, keyVersion: 1 } });
  ours = (t) => checker.check(t, () => tenant).valid;
  const secret = Buffer.from(key.secret, 'utf8');
  raw = (t) => {
    const dot = t.lastIndexOf('.');
    const sig = Buffer.from(t.slice(dot + 1), 'base64url');
    const mac = createHmac('sha256', secret).update(t.slice(0, dot)).digest();
    return sig.length === mac.length && timingSafeEqual(mac, sig);
  };
  for (const t of tokens.slice(0, 10)) {
    if (!ours(t)) throw new Error('the verifier check rejected a valid bench token');
    if (!raw(t)) throw new Error('the raw HMAC check rejected a valid bench token');
  }
  return { tokens: tokens.length };
}

/**
 * Runs `which` for `ms` milliseconds of wall time; checks per second of this
 * process's CPU time, so other load on the machine (which only takes wall
 * time away from us) does not move the figure.
 */
function measure({ which, ms }: { which: 'ours' | 'raw'; ms: number }): number {
  const op = which === 'ours' ? ours : raw;
  const n = tokens.length;
  let done = 0;
  let bad = 0;
  const cpu0 = process.cpuUsage();
  const end = performance.now() + ms;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) if (!op(tokens[(done + i) % n]!)) bad += 1;
    done += 1000;
  }
  const cpu = process.cpuUsage(cpu0);
  if (bad > 0) throw new Error(`${which}: ${bad} checks failed`);
  return (done / (cpu.user + cpu.system)) * 1e6;
}

serveWorker({ setup, measure });
