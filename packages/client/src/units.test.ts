import { ERROR_CODES } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { backoffDelay, refreshDelay } from './backoff.js';
import { SERVER_ERROR_CODES } from './client-error.js';
import { compareIds, SeenIds } from './message-ids.js';
import { connectUrl, refusalStatus } from './socket.js';

describe('backoffDelay', () => {
  it('doubles from the initial delay to the ceiling, with jitter in [d/2, d)', () => {
    const opts = { initialDelayMs: 500, maxDelayMs: 30_000 };
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, opts, () => 0))).toEqual([250, 500, 1000, 2000]);
    expect(backoffDelay(3, opts, () => 0.999)).toBeLessThan(4000);
    expect(backoffDelay(40, opts, () => 0)).toBe(15_000);
    expect(backoffDelay(40, opts, () => 1)).toBe(30_000);
  });
});

describe('refreshDelay', () => {
  const now = 1_000_000_000_000;
  it('refreshes at 80 % of the remaining lifetime or a minute before expiry, whichever is earlier', () => {
    expect(refreshDelay(now / 1000 + 3600, now)).toBe(3600_000 * 0.8);
    expect(refreshDelay(now / 1000 + 240, now)).toBe(180_000);
  });
  it('never before half the lifetime (a short token is not refreshed in a loop), and at once when already expired', () => {
    expect(refreshDelay(now / 1000 + 4, now)).toBe(2000);
    expect(refreshDelay(now / 1000 - 1, now)).toBe(0);
  });
});

describe('message ids', () => {
  it('compare numerically, not as strings', () => {
    expect(compareIds('9-0', '10-0')).toBeLessThan(0);
    expect(compareIds('10-2', '10-10')).toBeLessThan(0);
    expect(compareIds('5-5', '5-5')).toBe(0);
    expect(compareIds('x', '5-5')).toBeUndefined();
  });
  it('admit each id once and nothing at or before the last one', () => {
    const seen = new SeenIds('10-0');
    expect(seen.admit('9-9')).toBe(false);
    expect(seen.admit('10-0')).toBe(false);
    expect(seen.admit('10-1')).toBe(true);
    expect(seen.admit('10-1')).toBe(false);
    expect(seen.last).toBe('10-1');
    const opaque = new SeenIds();
    expect(opaque.admit('a')).toBe(true);
    expect(opaque.admit('a')).toBe(false);
  });
});

describe('socket helpers', () => {
  it('put the token in access_token, URL-encoded', () => {
    expect(connectUrl('wss://h/ws', 'a.b+c')).toBe('wss://h/ws?batch=2&access_token=a.b%2Bc');
    expect(connectUrl('wss://h/ws?x=1', 't')).toBe('wss://h/ws?x=1&batch=2&access_token=t');
  });
  it('read the refusal status where ws tells it, and nothing from a browser event', () => {
    expect(refusalStatus({ message: 'Unexpected server response: 401' })).toBe(401);
    expect(refusalStatus({ error: new Error('Unexpected server response: 503') })).toBe(503);
    expect(refusalStatus({ type: 'error' })).toBeUndefined();
  });
});

describe('SERVER_ERROR_CODES', () => {
  // Codes only operators, host servers and services meet (docs/PROTOCOL.md "Operator and service-to-service codes").
  const NOT_FOR_CLIENTS = ['invalid_host_sync_credentials', 'invalid_admin_token', 'invalid_internal_token', 'tenant_not_found', 'invalid_tenant_id', 'change_not_propagated', 'invalid_channel_rules', 'invalid_tenant_meta', 'invalid_limits', 'plan_not_found', 'plan_in_use', 'invalid_callbacks', 'invalid_webhook', 'webhook_not_found', 'too_many_webhooks'];
  it("covers every code of core's closed set that a client can meet", () => {
    const clientVisible = ERROR_CODES.filter((c) => !NOT_FOR_CLIENTS.includes(c));
    expect(clientVisible.filter((c) => !(SERVER_ERROR_CODES as readonly string[]).includes(c))).toEqual([]);
  });
});
