import { ManualClock } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { budgetKey, RefusalBudget, tenantOfToken } from './refusal-budget';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const tokenOf = (kid: unknown) => `${b64({ alg: 'HS256', typ: 'JWT', kid })}.${b64({ sub: 'x' })}.sig`;
const TENANT = '8f2a8c1e-3b4d-4e5f-9a6b-7c8d9e0f1a2b';

describe('RefusalBudget', () => {
  const make = (clock = new ManualClock(1_000_000)) => ({ clock, budget: new RefusalBudget({ perMinute: 6, burst: 3, clock }) });

  it('lets an address cause `burst` refusals at once, then one per 60/perMinute seconds', () => {
    const { clock, budget } = make();
    for (let i = 0; i < 3; i++) {
      expect(budget.exhausted('10.0.0.1')).toBeUndefined();
      budget.refused('10.0.0.1');
    }
    expect(budget.exhausted('10.0.0.1'), 'Retry-After: the next one in 10 s').toBe(10);
    expect(budget.exhausted('10.0.0.2'), 'another address is not affected').toBeUndefined();
    clock.advance(4_500);
    expect(budget.exhausted('10.0.0.1'), 'counts down').toBe(6);
    clock.advance(5_500);
    expect(budget.exhausted('10.0.0.1'), 'one more after 10 s').toBeUndefined();
    budget.refused('10.0.0.1');
    expect(budget.exhausted('10.0.0.1')).toBe(10);
    clock.advance(60_000);
    for (let i = 0; i < 3; i++) budget.refused('10.0.0.1');
    expect(budget.exhausted('10.0.0.1'), 'refilled to the burst, no more').toBe(10);
  });

  it('counts an IPv6 /64 as one client, and an IPv4-mapped address as its IPv4 address', () => {
    const { budget } = make();
    for (const a of ['2001:db8:1:2::1', '2001:db8:1:2:ffff::9', '2001:0db8:0001:0002:0:0:0:7']) budget.refused(a);
    expect(budget.exhausted('2001:db8:1:2::abcd')).toBe(10);
    expect(budget.exhausted('2001:db8:1:3::1')).toBeUndefined();
    for (let i = 0; i < 3; i++) budget.refused('::ffff:192.0.2.7');
    expect(budget.exhausted('192.0.2.7')).toBe(10);
  });

  it.each([
    ['192.0.2.1', '192.0.2.1'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['2001:DB8::', '2001:db8:0:0::/64'],
    ['::FFFF:10.1.2.3', '10.1.2.3'],
  ])('budgetKey(%s) = %s', (address, key) => {
    expect(budgetKey(address)).toBe(key);
  });

  it('remembers tenants served and host credentials accepted, for a while', () => {
    const clock = new ManualClock(1_000_000);
    const budget = new RefusalBudget({ perMinute: 60, burst: 1, clock, servedTtlMs: 10_000 });
    expect(budget.tokenOfServedTenant(tokenOf(TENANT))).toBe(false);
    budget.tenantServed(TENANT);
    expect(budget.tokenOfServedTenant(tokenOf(TENANT))).toBe(true);
    expect(budget.tokenOfServedTenant(tokenOf('another'))).toBe(false);
    budget.credentialServed(TENANT, 'Basic abc');
    expect(budget.credentialWasServed(TENANT, 'Basic abc')).toBe(true);
    expect(budget.credentialWasServed(TENANT, 'Basic abd')).toBe(false);
    expect(budget.credentialWasServed('other', 'Basic abc')).toBe(false);
    clock.advance(10_001);
    expect(budget.tokenOfServedTenant(tokenOf(TENANT))).toBe(false);
    expect(budget.credentialWasServed(TENANT, 'Basic abc')).toBe(false);
  });

  it('bounds the addresses it tracks (the least recently used is forgotten)', () => {
    const clock = new ManualClock(1_000_000);
    const budget = new RefusalBudget({ perMinute: 1, burst: 1, clock, maxAddresses: 2 });
    for (const a of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) budget.refused(a);
    expect(['10.0.0.1', '10.0.0.2', '10.0.0.3'].map((a) => budget.exhausted(a))).toEqual([undefined, 60, 60]);
  });
});

describe('tenantOfToken', () => {
  it.each([
    [tokenOf(TENANT), TENANT],
    [tokenOf(42), undefined],
    ['not-a-jws', undefined],
    ['.x.y', undefined],
    [`${Buffer.from('{not json').toString('base64url')}.x.y`, undefined],
    [`${b64(null)}.x.y`, undefined],
    [`${'a'.repeat(600)}.x.y`, undefined],
  ])('%s -> %s', (token, tenant) => {
    expect(tenantOfToken(token)).toBe(tenant);
  });
});
