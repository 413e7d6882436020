import { randomUUID } from 'node:crypto';
import { parseCapability } from '@service-relay/core';
import { FakeVerifier } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayHeaders, issueToken, startRealtime, type RealtimeInstance } from '../test-support/realtime-harness';
import { ACCESS_CASES, ALICE, type CapClaim } from './channel-access.cases';

// The channel-authorization table over REST, through realtime's REST side with
// the headers the gateway adds (x-relay-cap carries the claim). REST has no
// subscribe: those rows run over WebSocket (two-instances test).
describe('channel authorization over REST', () => {
  const verifier = new FakeVerifier();
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
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  const restCases = ACCESS_CASES.filter((c) => c.action === 'publish' || c.action === 'history');
  it.each(restCases)('$name → $expected', async (c) => {
    const res = await call(identityFor(c.userId, c.cap), c.channel, c.action === 'publish' ? 'POST' : 'GET');
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
});
