/**
 * Micro-check while developing (not a test): the core token check against a
 * raw node:crypto HMAC verify of the same tokens, interleaved in short rounds
 * so load from other processes hits both alike. Prints the median ratio; the
 * target is >= 0.5. Run: npm run check-speed -w services/auth-verifier
 */
import { createHmac, createSecretKey, randomUUID, timingSafeEqual } from 'node:crypto';
import { systemClock } from '@service-relay/core';
import { buildTenantKeys } from '../token/tenant-keys';
import { TokenChecker } from '../token/token-checker';

const secret = createHmac('sha256', 'seed').update(randomUUID()).digest('base64url');
const tenantId = randomUUID();
const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const header = enc({ alg: 'HS256', typ: 'JWT', kid: tenantId });
const nowS = Math.floor(Date.now() / 1000);
// 8192 distinct tokens cycle through the checker's 4096-entry memory of
// recent tokens, so every check parses; 64 repeat, the way clients reuse one.
const makeTokens = (n: number) => Array.from({ length: n }, () => {
  const payload = enc({ iss: 'service-relay', aud: 'service-relay', exp: nowS + 600, iat: nowS, tenant_id: tenantId, user_id: randomUUID() });
  return `${header}.${payload}.${createHmac('sha256', secret).update(`${header}.${payload}`).digest('base64url')}`;
});
const sets = { fresh: makeTokens(8192), repeated: makeTokens(64) };

const key = createSecretKey(Buffer.from(secret, 'utf8'));
const raw = (token: string) => {
  const dot = token.lastIndexOf('.');
  return timingSafeEqual(createHmac('sha256', key).update(token.slice(0, dot)).digest(), Buffer.from(token.slice(dot + 1), 'base64url'));
};
const checker = new TokenChecker({ clock: systemClock, maxLifetimeS: 86_400 });
const keys = buildTenantKeys(tenantId, { found: true, disabled: false, version: 1, primary: { secret, keyVersion: 1 } });
const ours = (token: string) => checker.check(token, () => keys).valid;

let cursor = 0;
function round(f: (t: string) => boolean, tokens: string[]): number {
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < 100) {
    for (let i = 0; i < 256; i++) if (!f(tokens[cursor++ % tokens.length]!)) throw new Error('a valid token failed');
    n += 256;
  }
  return n / ((performance.now() - t0) / 1000);
}

const rounds = 20;
for (const [name, tokens] of Object.entries(sets)) {
  const ratios: number[] = [];
  let rawSum = 0;
  let oursSum = 0;
  round(raw, tokens);
  round(ours, tokens);
  for (let r = 0; r < rounds; r++) {
    const a = round(raw, tokens);
    const b = round(ours, tokens);
    rawSum += a;
    oursSum += b;
    ratios.push(b / a);
  }
  ratios.sort((x, y) => x - y);
  process.stdout.write(
    `${name.padEnd(8)} tokens: raw HMAC verify ${(rawSum / rounds).toFixed(0)}/s, full check ${(oursSum / rounds).toFixed(0)}/s, median ratio ${ratios[rounds >> 1]!.toFixed(2)}\n`,
  );
}
