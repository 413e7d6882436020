import { parseCapability } from '@service-relay/channels';
import { ManualTenantFeed } from '@service-relay/tenant-events';
import { fakeIdentity } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, TEST_INTERNAL_TOKEN, type GatewayHarness } from '../testing/gateway-harness';

const INVALID = '{"errors":["invalid_or_missing_token"]}';
const CHALLENGE = 'Bearer realm="service-relay", error="invalid_token"';

describe('edge-gateway: bearer auth on /api/v1', () => {
  let h: GatewayHarness;
  const feed = new ManualTenantFeed();
  beforeAll(async () => {
    h = await startGatewayHarness({ feed, env: { VERIFY_DEADLINE_MS: '400' } });
  });
  afterAll(() => h.stop());

  const allow = (token: string) => {
    const id = fakeIdentity();
    h.verifier.allow(token, id);
    return id;
  };
  const get = (token: string | undefined, extra: Record<string, string> = {}) =>
    fetch(`${h.url}/api/v1/me`, { headers: { ...(token === undefined ? {} : { authorization: token }), ...extra } });

  it('answers missing, malformed and unknown tokens with the contract 401 and forwards nothing', async () => {
    for (const auth of [undefined, 'Basic dXNlcjpwYXNz', 'Bearer', 'Bearer a b', 'Bearer unknown.token.here', `Bearer ${'a'.repeat(9000)}`]) {
      const res = await get(auth);
      expect(res.status, String(auth).slice(0, 30)).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(CHALLENGE);
      expect(await res.text()).toBe(INVALID);
    }
    expect(h.realtime.requests).toHaveLength(0);
  });

  it('forwards a verified request with the identity it proved, never the client-sent one', async () => {
    const id = allow('tok-good');
    const res = await get('bEaReR   tok-good', {
      'x-relay-tenant-id': 'forged-tenant',
      'x-relay-user-id': 'forged-user',
      'x-relay-admin': 'yes',
      'x-relay-cap': '{"user:*":["subscribe","publish","history","presence"]}',
      'x-internal-token': 'forged-internal',
      'x-request-id': 'req-123',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('req-123');
    const seen = h.realtime.requests.at(-1)!;
    expect(seen.url).toBe('/api/v1/me');
    expect(seen.headers['x-relay-tenant-id']).toBe(id.tenantId);
    expect(seen.headers['x-relay-user-id']).toBe(id.userId);
    expect(seen.headers['x-relay-expires-at']).toBe(String(id.expiresAt));
    expect(seen.headers['x-relay-admin']).toBeUndefined();
    // The token has no cap claim, so the client's is dropped and none is added.
    expect(seen.headers['x-relay-cap']).toBeUndefined();
    expect(seen.headers['x-internal-token']).toBe(TEST_INTERNAL_TOKEN);
    expect(seen.headers['x-request-id']).toBe('req-123');
    expect(seen.headers.authorization).toBeUndefined();
  });

  it('forwards the token\'s cap claim as x-relay-cap (compact canonical JSON), replacing any client-sent one', async () => {
    const cap = parseCapability({ 'orders.*': ['history', 'subscribe'], 'chat:*': ['publish'] })!;
    h.verifier.allow('tok-cap', fakeIdentity({ cap }));
    for (let i = 0; i < 2; i++) {
      // The second request is answered from the verification cache: the claim survives it.
      const res = await get('Bearer tok-cap', { 'x-relay-cap': '{"*x":["publish"]}' });
      expect(res.status).toBe(200);
      expect(h.realtime.requests.at(-1)!.headers['x-relay-cap']).toBe('{"chat:*":["publish"],"orders.*":["subscribe","history"]}');
    }
  });

  it('serves repeat tokens from the cache and refuses a revoked one once the event publish returns', async () => {
    const id = allow('tok-revoke');
    expect((await get('Bearer tok-revoke')).status).toBe(200);
    const calls = h.verifier.calls;
    expect((await get('Bearer tok-revoke')).status).toBe(200);
    expect(h.verifier.calls).toBe(calls);
    // The verifier now refuses it, but the cached verdict still stands...
    h.verifier.deny('tok-revoke');
    expect((await get('Bearer tok-revoke')).status).toBe(200);
    // ...until the tenant change: the admin call returns after the feed applied it.
    await feed.push({ tenant_id: id.tenantId, kind: 'revoked_all', version: 2, revoked_key_versions: [1] });
    expect((await get('Bearer tok-revoke')).status).toBe(401);
  });

  it('does not serve from the cache while the tenant feed is not current, and drops it all on a reset', async () => {
    allow('tok-bus');
    expect((await get('Bearer tok-bus')).status).toBe(200);
    feed.setCurrent(false);
    const before = h.verifier.calls;
    expect((await get('Bearer tok-bus')).status).toBe(200);
    expect(h.verifier.calls).toBe(before + 1);
    h.verifier.deny('tok-bus');
    expect((await get('Bearer tok-bus')).status).toBe(401);
    feed.setCurrent(true);

    allow('tok-reset');
    expect((await get('Bearer tok-reset')).status).toBe(200);
    h.verifier.deny('tok-reset');
    await feed.reset();
    expect((await get('Bearer tok-reset')).status).toBe(401);
  });

  it('answers 503 auth_unavailable (never 401, never a pass) when the verifier cannot decide or is too slow', async () => {
    allow('tok-slow');
    for (const mode of ['silent', 'unavailable'] as const) {
      h.verifier[mode] = true;
      const res = await get('Bearer tok-slow');
      h.verifier[mode] = false;
      expect(res.status, mode).toBe(503);
      expect(await res.text()).toBe('{"errors":["auth_unavailable"]}');
    }
  });

  it('never writes a token to its logs', () => {
    const text = h.logs.join('');
    expect(text).toContain('"request_id":"req-123"');
    for (const secret of ['tok-good', 'tok-revoke', 'tok-bus', TEST_INTERNAL_TOKEN, 'forged-internal']) expect(text).not.toContain(secret);
  });

  it('answers 503 when the verifier is stopped', async () => {
    allow('tok-stopped');
    await h.verifier.stop();
    const res = await get('Bearer tok-stopped');
    expect(res.status).toBe(503);
    expect(await res.text()).toBe('{"errors":["auth_unavailable"]}');
    expect(h.realtime.requests.every((r) => r.headers['x-relay-tenant-id'] !== undefined)).toBe(true);
  });
});
