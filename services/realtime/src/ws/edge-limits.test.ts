import { FakeVerifier, rawExchange as raw } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { issueToken, startRealtime, TEST_INTERNAL_TOKEN, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { AUTH_FRAMES_PER_MINUTE } from './token-refresh';


describe('realtime edge limits', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const clients: WsTestClient[] = [];
  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier, env: { FIRST_BYTE_TIMEOUT_MS: '400', MAX_CONNECTIONS_PER_ADDRESS: '4' } });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await rt.stop();
    await verifier.stop();
  });

  it('a flood of auth frames on one connection leaves a concurrent upgrade of another tenant unharmed', async () => {
    const flooder = issueToken(verifier);
    const c = await WsTestClient.connect(rt.ws, flooder.token);
    clients.push(c);
    const calls = verifier.calls;
    const frames = 4500;
    for (let i = 0; i < frames; i++) c.ws.send(JSON.stringify({ type: 'auth', token: flooder.token, ref: i }));
    // While the flood is being answered, another tenant's user connects.
    const other = issueToken(verifier);
    const upgraded = await WsTestClient.connect(rt.ws, other.token);
    clients.push(upgraded);
    expect(upgraded.frames[0]).toMatchObject({ type: 'ready', tenant_id: other.identity.tenantId });
    await vi.waitFor(() => expect(c.frames.filter((f) => f.type === 'error' || f.type === 'authenticated')).toHaveLength(frames), { timeout: 15_000 });
    const limited = c.frames.filter((f) => f.type === 'error' && f.code === 'rate_limited').length;
    const refreshed = c.frames.filter((f) => f.type === 'authenticated').length;
    expect(refreshed).toBeGreaterThanOrEqual(1);
    expect(refreshed).toBeLessThanOrEqual(AUTH_FRAMES_PER_MINUTE);
    expect(limited).toBe(frames - refreshed);
    // At most the per-minute allowance reached the verifier (plus the upgrade).
    expect(verifier.calls - calls).toBeLessThanOrEqual(AUTH_FRAMES_PER_MINUTE + 1);
    expect(verifier.internalTokensSeen).toContain(TEST_INTERNAL_TOKEN);
  });

  it('answers a second auth frame while the first is being checked with rate_limited', async () => {
    const id = issueToken(verifier);
    const c = await WsTestClient.connect(rt.ws, id.token);
    clients.push(c);
    c.ws.send(JSON.stringify({ type: 'auth', token: id.token, ref: 'a' }));
    c.ws.send(JSON.stringify({ type: 'auth', token: id.token, ref: 'b' }));
    await vi.waitFor(() => expect(c.frames.filter((f) => f.ref === 'a' || f.ref === 'b')).toHaveLength(2));
    expect(c.frames.find((f) => f.ref === 'a')).toMatchObject({ type: 'authenticated' });
    expect(c.frames.find((f) => f.ref === 'b')).toMatchObject({ type: 'error', code: 'rate_limited' });
  });

  it('counts open WebSockets toward the per-address cap and refuses the next connection with a 503', async () => {
    // Fill the cap of four with WebSockets (some are open from the tests above).
    let refusal: Error | undefined;
    for (let i = 0; i < 4 && !refusal; i++) {
      await WsTestClient.connect(rt.ws, issueToken(verifier).token).then(
        (c) => clients.push(c),
        (err: Error) => (refusal = err),
      );
    }
    expect(refusal?.message).toBe('upgrade refused: 503');
    const answer = await raw(rt.server.port, 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer.endsWith('{"errors":["unavailable"]}')).toBe(true);
    await clients.pop()!.close();
    await new Promise((r) => setTimeout(r, 100));
    expect(await raw(rt.server.port, 'GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('closes a silent connection and answers header overflow with the contract JSON', async () => {
    await clients.pop()!.close();
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    expect(await raw(rt.server.port, '', 5000)).toBe('');
    expect(Date.now() - t0).toBeLessThan(3000);
    const overflow = await raw(rt.server.port, `GET /ws HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(overflow).toMatch(/^HTTP\/1\.1 431 /);
    expect(overflow.endsWith('{"errors":["headers_too_large"]}')).toBe(true);
  });
});
