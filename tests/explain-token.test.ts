import { randomUUID } from 'node:crypto';
import { forgeToken, jsonWithDuplicate, signToken, tokenClaims, tokenHeader, type Json } from '@service-relay/testkit';
import { REJECT_REASONS } from '@service-relay/auth-verifier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenantWithSecret, me, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';

const PUBLIC_401 = '{"errors":["invalid_or_missing_token"]}';

interface Explanation {
  valid: boolean;
  reason: string | null;
  meaning: string | null;
  fix: string | null;
  header: Json | null;
  claims: Json | null;
  key_slot?: string;
}

// #29 item 3: an operator asks why a token is refused (`npm run admin --
// explain-token`, the registry's admin API, the verifier's Explain RPC), for
// every reason code of the closed set, while the public answer to the same
// token stays the byte-identical 401.
describe('explain-token: the verifier\'s reason for every refused token, to an operator only', () => {
  let stack: Stack;
  let tenant: CreatedTenant;
  let secret: string;
  let disabled: { tenant: CreatedTenant; secret: string };
  const revokedUser = randomUUID();
  const tokens = new Map<string, string>();

  const explain = async (token: string): Promise<{ code: number | null; body: Explanation; stdout: string }> => {
    const r = await stack.admin('explain-token', token);
    expect(r.stderr).toBe('');
    return { code: r.code, body: JSON.parse(r.stdout) as Explanation, stdout: r.stdout };
  };

  beforeAll(async () => {
    stack = await startStack();
    ({ tenant, secret } = await createTenantWithSecret(stack));
    disabled = await createTenantWithSecret(stack);
    expect((await stack.admin('disable', disabled.tenant.tenant_id)).code).toBe(0);
    expect((await stack.admin('users', 'revoke', tenant.tenant_id, revokedUser)).code).toBe(0);

    const T = tenant.tenant_id;
    const now = Math.floor(Date.now() / 1000);
    const header = (extra: Json = {}): Json => ({ ...tokenHeader(T), ...extra });
    const claims = (extra: Json = {}): Json => ({ ...tokenClaims({ tenantId: T, userId: randomUUID(), expiresIn: 600 }), ...extra });
    const forge = (o: { header?: Json | string; payload?: Json | string; secret?: string } = {}) => forgeToken({ secret: o.secret ?? secret, header: o.header ?? header(), payload: o.payload ?? claims() });
    const cases: Record<(typeof REJECT_REASONS)[number], string> = {
      too_large: forge({ payload: claims({ pad: 'x'.repeat(8200) }) }),
      malformed: `${forge()}=`,
      duplicate_member: forge({ payload: jsonWithDuplicate(claims(), 'user_id', randomUUID()) }),
      bad_header: forge({ header: { alg: 'HS256', typ: 'JWT' } }),
      bad_alg: forge({ header: header({ alg: 'HS512' }) }),
      bad_issuer: forge({ payload: claims({ iss: 'my-app' }) }),
      bad_audience: forge({ payload: claims({ aud: ['service-relay'] }) }),
      bad_exp: forge({ payload: claims({ exp: String(now + 600) }) }),
      expired: forge({ payload: claims({ exp: now - 10 }) }),
      lifetime_too_long: forge({ payload: claims({ exp: now + 2 * 86_400 }) }),
      bad_tenant_id: forge({ header: header({ kid: T.toUpperCase() }), payload: claims({ tenant_id: T.toUpperCase() }) }),
      bad_user_id: forge({ payload: claims({ user_id: 'alice' }) }),
      bad_cap: forge({ payload: claims({ cap: '*' }) }),
      kid_mismatch: forge({ header: header({ kid: disabled.tenant.tenant_id }) }),
      unknown_tenant: (() => {
        const U = randomUUID();
        return signToken({ secret, tenantId: U, userId: randomUUID() });
      })(),
      tenant_disabled: signToken({ secret: disabled.secret, tenantId: disabled.tenant.tenant_id, userId: randomUUID() }),
      // A host's most common slip: signing with the host-sync client secret.
      bad_signature: forge({ secret: tenant.host_sync_client_secret }),
      user_revoked: forge({ payload: claims({ user_id: revokedUser, iat: now - 60 }) }),
    };
    for (const [reason, token] of Object.entries(cases)) tokens.set(reason, token);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('covers the closed set', () => {
    expect([...tokens.keys()].sort()).toEqual([...REJECT_REASONS].sort());
  });

  it.each([...REJECT_REASONS])('%s: the public answer is the uniform 401, the operator gets the reason, its meaning and fix, the decoded token, no secret', async (reason) => {
    const token = tokens.get(reason)!;
    const pub = await me(stack.gatewayUrl, token);
    expect(pub.status).toBe(401);
    expect(await pub.text()).toBe(PUBLIC_401);

    const { code, body, stdout } = await explain(token);
    expect(code).toBe(0);
    expect(body).toMatchObject({ valid: false, reason });
    expect(body.meaning?.length).toBeGreaterThan(20);
    expect(body.fix?.length).toBeGreaterThan(20);
    // Every case but the malformed one decodes; the claims are the token's own.
    if (reason !== 'malformed') {
      expect(body.header).toMatchObject({ typ: 'JWT' });
      expect(body.claims).toMatchObject({ iss: expect.any(String) });
    }
    for (const s of [secret, disabled.secret, tenant.host_sync_client_secret, token.split('.')[2]!]) expect(stdout).not.toContain(s);
  });

  it('a valid token is explained as valid, with the key slot that matched', async () => {
    const userId = randomUUID();
    const token = signToken({ secret, tenantId: tenant.tenant_id, userId });
    const { body } = await explain(token);
    expect(body).toMatchObject({ valid: true, reason: null, meaning: null, fix: null, key_slot: 'primary', claims: { user_id: userId, tenant_id: tenant.tenant_id } });
  });

  it('reads the token from standard input with -, and audits every explanation under the tenant it names, never the token', async () => {
    const token = tokens.get('expired')!;
    const r = await runWithStdin(stack, token);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ reason: 'expired' });
    const audit = await stack.admin('audit', '--tenant', tenant.tenant_id, '--limit', '50');
    const entries = (JSON.parse(audit.stdout) as { entries: Array<{ action: string; status: number }> }).entries;
    expect(entries.filter((e) => e.action === 'explain_token' && e.status === 200).length).toBeGreaterThanOrEqual(10);
    const logs = stack.allLogs();
    for (const t of tokens.values()) expect(logs).not.toContain(t.split('.')[2]!);
  });

  it('refuses without the admin token, and answers 400 to a body that is not {"token": ...}', async () => {
    const url = `${stack.registryUrl}/admin/explain_token`;
    const anonymous = await fetch(url, { method: 'POST', body: JSON.stringify({ token: tokens.get('expired') }) });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.text()).toBe('{"errors":["invalid_admin_token"]}');
    const auth = { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' };
    for (const body of ['', '[]', '{"token":1}', '{"token":"x","extra":1}', 'nope']) {
      const res = await fetch(url, { method: 'POST', headers: auth, body });
      expect(res.status, body).toBe(400);
      expect(await res.json()).toMatchObject({ errors: ['invalid_body'], problem: expect.any(String) });
    }
    const get = await fetch(url, { headers: auth });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });
});

async function runWithStdin(stack: Stack, input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { spawn } = await import('node:child_process');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/tenant-registry/src/cli/admin-cli.ts', 'explain-token', '-'], {
      env: { ...process.env, REGISTRY_URL: stack.registryUrl, ADMIN_TOKEN: stack.adminToken },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}
