import { describe, expect, it } from 'vitest';
import { TenantPositions } from './tenant-positions';

describe('TenantPositions', () => {
  it.each([
    { what: 'nothing seen: any verdict will do', steps: [], tenant: 'a', required: 0 },
    { what: 'the last change of the tenant', steps: [['a', 3], ['a', 7], ['b', 9]], tenant: 'a', required: 7 },
    { what: 'never lowered by an older sequence', steps: [['a', 7], ['a', 5]], tenant: 'a', required: 7 },
    { what: "another tenant's change asks nothing", steps: [['b', 9]], tenant: 'a', required: 0 },
    { what: 'a reset raises every tenant to its base', steps: [['a', 3], ['reset', 12]], tenant: 'a', required: 12 },
    { what: 'changes after a reset count again', steps: [['reset', 12], ['a', 15]], tenant: 'a', required: 15 },
    { what: 'a later reset never lowers the floor', steps: [['reset', 12], ['reset', 4]], tenant: 'z', required: 12 },
  ] as Array<{ what: string; steps: Array<[string, number]>; tenant: string; required: number }>)('$what', ({ steps, tenant, required }) => {
    const p = new TenantPositions();
    for (const [t, seq] of steps) {
      if (t === 'reset') p.reset(seq);
      else p.applied(t, seq);
    }
    expect(p.required(tenant)).toBe(required);
  });

  it('a tenant evicted from the bounded map leaves its sequence in the floor every unlisted tenant inherits', () => {
    const p = new TenantPositions();
    for (let i = 0; i < 100_001; i++) p.applied(`t${i}`, i + 1);
    // t0 (seq 1) was evicted: asking for it (or any unknown tenant) asks at least that much.
    expect(p.required('t0')).toBe(1);
    expect(p.required('never-seen')).toBe(1);
    expect(p.required('t100000')).toBe(100_001);
  });
});
