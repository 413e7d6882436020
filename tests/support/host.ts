import { execFile } from 'node:child_process';
import { SignJWT } from 'jose';
import type { Stack } from './stack';

export interface CreatedTenant {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

export function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

/** The host's secret fetch through the gateway. */
export function fetchSecret(gatewayUrl: string, tenantId: string, clientId: string, clientSecret: string): Promise<Response> {
  return fetch(`${gatewayUrl}/api/host/tenants/${tenantId}/jwt_secret/fetch`, {
    method: 'POST',
    headers: { authorization: basic(clientId, clientSecret) },
  });
}

/** A host in Node signing with jose, as the seed's production flow describes. */
export function signWithJose(secret: string, tenantId: string, userId: string, lifetimeS = 300): Promise<string> {
  return new SignJWT({ tenant_id: tenantId, user_id: userId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: tenantId })
    .setIssuer('service-relay')
    .setAudience('service-relay')
    .setExpirationTime(Math.floor(Date.now() / 1000) + lifetimeS)
    .sign(new TextEncoder().encode(secret));
}

const PYJWT_SIGN = `
import json, sys, time, jwt
a = json.loads(sys.argv[1])
claims = {"iss": "service-relay", "aud": "service-relay", "exp": int(time.time()) + a["lifetime"],
          "tenant_id": a["tenant_id"], "user_id": a["user_id"]}
print(jwt.encode(claims, a["secret"], algorithm="HS256", headers={"kid": a["tenant_id"]}))
`;

/** A host written in Python: PyJWT from Debian's python3-jwt (system interpreter, not the one on PATH). */
export function signWithPyJwt(secret: string, tenantId: string, userId: string, lifetimeS = 300): Promise<string> {
  const args = JSON.stringify({ secret, tenant_id: tenantId, user_id: userId, lifetime: lifetimeS });
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/python3', ['-c', PYJWT_SIGN, args], (err, stdout, stderr) => {
      if (err) reject(new Error(`PyJWT signing failed: ${stderr || err.message}`));
      else resolve(stdout.trim());
    });
  });
}

export async function me(gatewayUrl: string, token: string): Promise<Response> {
  return fetch(`${gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
}

/** A tenant made with the admin CLI, and its primary signing secret fetched through the gateway as a host would. */
export async function createTenantWithSecret(stack: { admin: Stack['admin']; gatewayUrl: string }): Promise<{ tenant: CreatedTenant; secret: string }> {
  const r = await stack.admin('create-tenant');
  if (r.code !== 0) throw new Error(`create-tenant exited ${r.code}: ${r.stderr}`);
  const tenant = JSON.parse(r.stdout) as CreatedTenant;
  const res = await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret);
  if (res.status !== 200) throw new Error(`secret fetch answered ${res.status}`);
  return { tenant, secret: ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary };
}
