import { randomUUID } from 'node:crypto';
import { parseCapability } from '@service-relay/channels';
import { FakeVerifier } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRulesSource } from '../test-support/memory-rules-source';
import { gatewayHeaders, issueToken, startRealtime, type RealtimeInstance } from '../test-support/realtime-harness';
import { ACCESS_CASES, ALICE, TENANT_RULES, type AccessCase, type CapClaim } from './channel-access.cases';

// The channel-authorization table over REST, through realtime's REST side with
// the headers the gateway adds (x-relay-cap carries the claim). REST has no
// subscribe: those rows run over WebSocket (two-instances test).
describe('channel authorization over REST', () => {
  const verifier = new FakeVerifier();
  // The registry's answer on each tenant's rules (rows with rules set them for a tenant of their own).
  const rules = new MemoryRulesSource();
  let rt: RealtimeInstance;
  const identityFor = (userId: string, cap: CapClaim, tenantId = randomUUID()): VerifiedIdentity =>
    issueToken(verifier, { tenantId, userId, ...(cap !== undefined && { cap: parseCapability(cap)! }) }).identity;
  const call = (identity: VerifiedIdentity, channel: string, method: 'GET' | 'POST', extra: Record<string, string> = {}) =>
    fetch(`${rt.http}/api/v1/channels/${encodeURIComponent(channel)}/messages`, {
      method,
      headers: { ...gatewayHeaders(identity), 'content-type': 'application/json', ...extra },
      ...(method === 'POST' && { body: JSON.stringify({ data: { hello: 1 } }) }),
    });

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier, channelRules: rules });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  const restCases = ACCESS_CASES.filter((c) => c.action === 'publish' || c.action === 'history');
  const tenantOf = (c: AccessCase) => {
    const tenantId = randomUUID();
    if (c.rules !== undefined) rules.set(tenantId, c.rules);
    return tenantId;
  };
  it.each(restCases)('$name → $expected', async (c) => {
    const res = await call(identityFor(c.userId, c.cap, tenantOf(c)), c.channel, c.action === 'publish' ? 'POST' : 'GET');
    if (c.expected === 'allow') {
      expect(res.status).toBe(c.action === 'publish' ? 201 : 200);
      await res.arrayBuffer();
    } else {
      expect(res.status).toBe(403);
      expect(await res.text()).toBe('{"errors":["forbidden_channel"]}');
    }
  });

  it('refuses a forbidden publish before reading its body, and stores nothing', async () => {
    const tenantId = randomUUID();
    const reader = identityFor(ALICE, { 'orders.*': ['subscribe', 'history'] }, tenantId);
    const refused = await fetch(`${rt.http}/api/v1/channels/orders.eu/messages`, { method: 'POST', headers: gatewayHeaders(reader), body: 'not json' });
    expect(refused.status).toBe(403);
    expect(await refused.text()).toBe('{"errors":["forbidden_channel"]}');
    const history = await call(reader, 'orders.eu', 'GET');
    expect(((await history.json()) as { messages: unknown[] }).messages).toEqual([]);
  });

  it('refuses (401) an x-relay-cap header it cannot read: only the gateway sets it, so that is a fault, never a pass', async () => {
    const identity = identityFor(ALICE, undefined);
    for (const bad of ['nope', '[]', '{"orders":["admin"]}', '{"a*b":["subscribe"]}']) {
      const res = await call(identity, 'orders', 'GET', { 'x-relay-cap': bad });
      expect(res.status).toBe(401);
      await res.arrayBuffer();
    }
  });

  it("obeys a tenant's new rules from the feed change on: the next request, no registry question", async () => {
    const tenantId = randomUUID();
    const alice = identityFor(ALICE, undefined, tenantId);
    expect((await call(alice, 'news', 'POST')).status).toBe(201);
    const asked = rules.calls;
    rules.set(tenantId, TENANT_RULES);
    // The change as the registry's feed carries it (applied before the feed reports it, as the admin call waits for).
    await rt.feed.push({ tenant_id: tenantId, kind: 'channel_rules', version: 1, revoked_key_versions: [], detail: { rules: TENANT_RULES, rules_version: 1 } });
    const refused = await call(alice, 'news', 'POST');
    expect(refused.status).toBe(403);
    expect(await refused.text()).toBe('{"errors":["forbidden_channel"]}');
    expect((await call(alice, 'chat:room-1', 'POST')).status).toBe(201);
    expect(rules.calls).toBe(asked);
  });

  it('fails closed (503 unavailable) while the registry cannot say what a new tenant\'s rules are, and recovers', async () => {
    const alice = identityFor(ALICE, undefined);
    rules.failing = true;
    try {
      for (const method of ['GET', 'POST'] as const) {
        const res = await call(alice, 'news', method);
        expect(res.status).toBe(503);
        expect(await res.text()).toBe('{"errors":["unavailable"]}');
      }
    } finally {
      rules.failing = false;
    }
    expect((await call(alice, 'news', 'POST')).status).toBe(201);
    // Known now: the registry going away again does not matter while the feed is current.
    rules.failing = true;
    try {
      expect((await call(alice, 'news', 'GET')).status).toBe(200);
      // Not current: no cached rules are trusted, and the registry cannot be asked.
      rt.feed.setCurrent(false);
      expect((await call(alice, 'news', 'GET')).status).toBe(503);
    } finally {
      rt.feed.setCurrent(true);
      rules.failing = false;
    }
    expect(rt.logs.join('')).not.toContain('tok-');
  });
});
