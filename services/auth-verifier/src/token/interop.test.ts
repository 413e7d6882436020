import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { hs256Matches } from './hs256';
import { buildTenantKeys } from './tenant-keys';
import { TokenChecker } from './token-checker';

const NOW_S = Math.floor(Date.now() / 1000);
const tenantId = randomUUID();
// Shaped like a fetched secret: 32 random bytes in base64url.
const secret = 'q3Z0bW9vc2UtY2FmZV9iYWJlLWRlYWQtYmVlZi0wMTIz';
const keys = buildTenantKeys(tenantId, { found: true, disabled: false, version: 1, primary: { secret, keyVersion: 7 } });
const checker = new TokenChecker({ clock: new ManualClock(NOW_S * 1000), maxLifetimeS: 86_400 });

describe('RFC 7515 appendix A.1 (HS256)', () => {
  it('verifies at the signature layer with the raw key bytes of the JWK', () => {
    const k = 'AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow';
    const jws =
      'eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9' +
      '.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ' +
      '.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
    const [h, p, s] = jws.split('.') as [string, string, string];
    const key = Buffer.from(k, 'base64url');
    expect(hs256Matches(`${h}.${p}`, Buffer.from(s, 'base64url'), key)).toBe(true);
    expect(hs256Matches(`${h}.${p}x`, Buffer.from(s, 'base64url'), key)).toBe(false);
  });
});

describe('tokens signed by independent libraries with a fetched secret', () => {
  it("jose's SignJWT", async () => {
    const userId = randomUUID();
    const token = await new SignJWT({ tenant_id: tenantId, user_id: userId })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: tenantId })
      .setIssuer('service-relay')
      .setAudience('service-relay')
      .setIssuedAt(NOW_S)
      .setExpirationTime(NOW_S + 900)
      .sign(new TextEncoder().encode(secret));
    expect(checker.check(token, () => keys)).toEqual({ valid: true, identity: { tenantId, userId, expiresAt: NOW_S + 900, keySlot: 'primary', keyVersion: 7, issuedAt: NOW_S } });
  });

  it("PyJWT (Debian's python3-jwt under /usr/bin/python3)", () => {
    const userId = randomUUID();
    const script = [
      'import json, sys, jwt',
      'claims = json.loads(sys.argv[1])',
      'tok = jwt.encode(claims, sys.argv[2], algorithm="HS256", headers={"kid": claims["tenant_id"]})',
      'print(tok if isinstance(tok, str) else tok.decode())',
    ].join('\n');
    const claims = { iss: 'service-relay', aud: 'service-relay', exp: NOW_S + 600, iat: NOW_S, tenant_id: tenantId, user_id: userId };
    // Runs unconditionally: a missing interpreter or module fails this test.
    const token = execFileSync('/usr/bin/python3', ['-c', script, JSON.stringify(claims), secret], { encoding: 'utf8' }).trim();
    expect(checker.check(token, () => keys)).toEqual({ valid: true, identity: { tenantId, userId, expiresAt: NOW_S + 600, keySlot: 'primary', keyVersion: 7, issuedAt: NOW_S } });
    const other = execFileSync('/usr/bin/python3', ['-c', script, JSON.stringify(claims), 'another-secret-of-enough-length-0123456789ab'], { encoding: 'utf8' }).trim();
    expect(checker.check(other, () => keys)).toEqual({ valid: false, reason: 'bad_signature' });
  });
});
