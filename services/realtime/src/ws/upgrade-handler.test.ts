import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeVerifier } from '@service-relay/testkit';
import { issueToken, startRealtime, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { MemoryTenantConnections } from '../limits/memory-tenant-connections';
import type { Admission, TenantConnections } from '../limits/tenant-connections';

const CHALLENGE = 'Bearer realm="service-relay", error="invalid_token"';

describe('WebSocket upgrade authentication', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('accepts the token from the Authorization header in any scheme case, or from access_token', async () => {
    const { token, identity } = issueToken(verifier);
    for (const opts of [{ scheme: 'Bearer' }, { scheme: 'bEARER' }, { via: 'query' as const }]) {
      const c = await WsTestClient.connect(rt.ws, token, opts);
      expect(c.frames[0]).toMatchObject({ type: 'ready', tenant_id: identity.tenantId });
      await c.close();
    }
  });

  it('answers a missing, malformed or rejected token with the contract 401 before upgrading', async () => {
    const { token } = issueToken(verifier, { expiresAt: Math.floor(Date.now() / 1000) - 1 });
    const cases: [string, Record<string, string>][] = [
      [rt.ws, {}],
      [rt.ws, { authorization: 'Basic abc' }],
      [rt.ws, { authorization: 'Bearer' }],
      [rt.ws, { authorization: 'Bearer unknown-token' }],
      [`${rt.ws}?access_token=unknown-token`, {}],
      [rt.ws, { authorization: `Bearer ${token}` }],
    ];
    for (const [url, headers] of cases) {
      const r = await WsTestClient.refusal(url, headers);
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toBe(CHALLENGE);
      expect(r.body).toBe('{"errors":["invalid_or_missing_token"]}');
    }
  });

  it('answers 503 auth_unavailable when the verifier cannot decide, and never passes', async () => {
    const { token } = issueToken(verifier);
    verifier.unavailable = true;
    try {
      const r = await WsTestClient.refusal(rt.ws, { authorization: `Bearer ${token}` });
      expect(r).toMatchObject({ status: 503, body: '{"errors":["auth_unavailable"]}' });
    } finally {
      verifier.unavailable = false;
    }
  });

  it('answers 503 when the verifier is not reachable at all', async () => {
    const gone = new FakeVerifier();
    await gone.start();
    const rt2 = await startRealtime({ verifier: gone, env: { VERIFY_DEADLINE_MS: '300' } });
    await gone.stop();
    const r = await WsTestClient.refusal(rt2.ws, { authorization: 'Bearer whatever' });
    expect(r.status).toBe(503);
    await rt2.stop();
  });

  it('never writes a query token to the logs', async () => {
    const secret = 'query-token-that-must-not-be-logged';
    await WsTestClient.refusal(`${rt.ws}?access_token=${secret}&x=1`);
    expect(rt.logs.some((l) => l.includes('websocket upgrade refused'))).toBe(true);
    expect(rt.logs.join('\n')).not.toContain(secret);
  });

  it('serves only /ws for upgrades', async () => {
    const { token } = issueToken(verifier);
    const r = await WsTestClient.refusal(rt.ws.replace('/ws', '/other'), { authorization: `Bearer ${token}` });
    expect(r).toMatchObject({ status: 404, body: '{"errors":["not_found"]}' });
  });

  it('answers a plain request to /ws with 426 upgrade_required', async () => {
    const res = await fetch(rt.ws.replace(/^ws/, 'http'));
    expect(res.status).toBe(426);
    expect(res.headers.get('upgrade')).toBe('websocket');
    expect(await res.json()).toEqual({ errors: ['upgrade_required'] });
  });

  it('judges a token again when its tenant is disabled while the connection slot is being taken', async () => {
    // A counter that holds every acquire until the test lets it go (Redis answering slowly).
    const counts = new MemoryTenantConnections(100);
    const held: Array<() => void> = [];
    const gated: TenantConnections = {
      limit: counts.limit,
      acquire: (tenantId) => new Promise<Admission>((resolve) => held.push(() => void counts.acquire(tenantId).then(resolve))),
      forget: (tenantId) => counts.forget(tenantId),
      close: () => counts.close(),
    };
    const rt2 = await startRealtime({ verifier, tenantConnections: gated });
    // Verdicts judged on state before any change (a verifier that has not applied the disable yet).
    verifier.asOfSeq = 0;
    try {
      const { token, identity } = issueToken(verifier);
      const refused = WsTestClient.refusal(rt2.ws, { authorization: `Bearer ${token}` });
      for (let i = 0; i < 200 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(held).toHaveLength(1);
      // The disable reaches the verifier and this instance while the slot is still being taken.
      verifier.deny(token);
      await rt2.feed.push({ tenant_id: identity.tenantId, kind: 'disabled', version: 1, revoked_key_versions: [] });
      held[0]!();
      expect(await refused).toMatchObject({ status: 401, body: '{"errors":["invalid_or_missing_token"]}' });
      // Its slot went back.
      expect(counts.held(identity.tenantId)).toBe(0);
      // Another tenant's client, checked the same way without a change in between, is admitted.
      const other = issueToken(verifier);
      const opening = WsTestClient.connect(rt2.ws, other.token);
      for (let i = 0; i < 200 && held.length === 1; i++) await new Promise((r) => setTimeout(r, 10));
      held[1]!();
      const c = await opening;
      expect(c.frames[0]).toMatchObject({ type: 'ready', tenant_id: other.identity.tenantId });
      await c.close();
    } finally {
      verifier.asOfSeq = Number.MAX_SAFE_INTEGER;
      await rt2.stop();
    }
  });
});
