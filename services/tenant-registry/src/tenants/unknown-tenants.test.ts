import { ManualClock } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { UnknownTenants } from './unknown-tenants';

const A = '5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
const B = '6b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e';

describe('UnknownTenants', () => {
  it('remembers an unknown id for its TTL only', () => {
    const clock = new ManualClock(1_000_000);
    const unknown = new UnknownTenants(clock, 10, 5000);
    expect(unknown.has(A)).toBe(false);
    unknown.add(A);
    expect(unknown.has(A)).toBe(true);
    clock.advance(4999);
    expect(unknown.has(A)).toBe(true);
    clock.advance(1);
    expect(unknown.has(A)).toBe(false);
  });

  it('forgets an id as soon as it is created', () => {
    const unknown = new UnknownTenants(new ManualClock(1_000_000));
    unknown.add(A);
    unknown.forget(A);
    expect(unknown.has(A)).toBe(false);
  });

  it('stays within its bound under a flood of distinct ids', () => {
    const unknown = new UnknownTenants(new ManualClock(1_000_000), 100);
    for (let i = 0; i < 10_000; i++) unknown.add(`${i}`);
    expect(unknown.size).toBe(100);
    unknown.add(B);
    expect(unknown.has(B)).toBe(true);
  });
});
