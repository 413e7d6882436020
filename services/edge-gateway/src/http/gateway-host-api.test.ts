import { MAX_HOST_API_BODY_BYTES } from '@service-relay/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, TEST_INTERNAL_TOKEN, type GatewayHarness } from '../testing/gateway-harness';

const TENANT = '0f1e2d3c-4b5a-4697-8877-665544332211';
const basic = `Basic ${Buffer.from('hs_client:secret').toString('base64')}`;

describe('edge-gateway: host server API (#13)', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGatewayHarness({});
    h.registry.handler = (_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
      res.end('{"messages":[]}');
    };
  });
  afterAll(() => h.stop());

  const paths = ['messages', 'channels/room%3A1/presence', 'users/1b4e28ba-2fa1-41d2-883f-0016d3cca427/disconnect', 'users/1b4e28ba-2fa1-41d2-883f-0016d3cca427/revoke_tokens'];

  it.each(paths)('forwards %s to the registry as written, Basic kept, client x-relay-* and x-internal-token dropped, the client address vouched for', async (path) => {
    const res = await fetch(`${h.url}/api/host/tenants/${TENANT}/${path}`, {
      method: 'POST',
      headers: { authorization: basic, 'content-type': 'application/json', 'x-relay-server': '1', 'x-relay-tenant-id': 'forged', 'x-relay-client-address': '192.0.2.1', 'x-internal-token': 'forged' },
      body: '{"channels":["a"],"data":1}',
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const seen = h.registry.requests.at(-1)!;
    expect(seen.url).toBe(`/api/host/tenants/${TENANT}/${path}`);
    expect(seen.headers.authorization).toBe(basic);
    expect(seen.headers['x-relay-server']).toBeUndefined();
    expect(seen.headers['x-relay-tenant-id']).toBeUndefined();
    expect(seen.headers['x-internal-token']).toBe(TEST_INTERNAL_TOKEN);
    expect(seen.headers['x-relay-client-address']).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
  });

  it('takes a publish of 64 KiB of data to 100 channels, and refuses a body over its limit with 413 before forwarding', async () => {
    const channels = Array.from({ length: 100 }, (_, i) => `c${i}`.padEnd(128, 'x'));
    const body = JSON.stringify({ channels, data: 'd'.repeat(65_536 - 2) });
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(MAX_HOST_API_BODY_BYTES);
    expect((await fetch(`${h.url}/api/host/tenants/${TENANT}/messages`, { method: 'POST', headers: { authorization: basic }, body })).status).toBe(201);
    const before = h.registry.requests.length;
    const res = await fetch(`${h.url}/api/host/tenants/${TENANT}/messages`, { method: 'POST', headers: { authorization: basic }, body: 'x'.repeat(MAX_HOST_API_BODY_BYTES + 1) });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ errors: ['payload_too_large'] });
    expect(h.registry.requests.length).toBe(before);
  });
});
