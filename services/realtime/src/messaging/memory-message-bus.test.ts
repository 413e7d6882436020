import { describe, expect, it } from 'vitest';
import { ManualClock } from '@service-relay/core';
import { describeMessageBusContract } from './message-bus-contract';
import { MemoryMessageBus } from './memory-message-bus';
import { compareMessageIds } from './message-id';

describeMessageBusContract('memory', async (maxMessages) => {
  const bus = new MemoryMessageBus({ maxMessages, ttlS: 60 });
  return [bus, bus];
});

describe('MemoryMessageBus', () => {
  const ref = { tenantId: '00000000-0000-4000-8000-000000000001', channel: 'c' };

  it('never lets ids go backwards when the clock does', async () => {
    const clock = new ManualClock(10_000);
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 }, clock);
    const m1 = await bus.publish(ref, 'u', '1');
    const m2 = await bus.publish(ref, 'u', '2');
    clock.set(5_000);
    const m3 = await bus.publish(ref, 'u', '3');
    expect([m1.id, m2.id, m3.id]).toEqual(['10000-0', '10000-1', '10000-2']);
    clock.set(10_001);
    expect((await bus.publish(ref, 'u', '4')).id).toBe('10001-0');
  });

  it('drops a channel idle for longer than the TTL', async () => {
    const clock = new ManualClock(0);
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 }, clock);
    await bus.publish(ref, 'u', '1');
    clock.advance(59_999);
    expect(await bus.history(ref, { limit: 10 })).toHaveLength(1);
    clock.advance(1);
    expect(await bus.history(ref, { limit: 10 })).toEqual([]);
  });

  it('compares ids numerically, not as strings', () => {
    expect(compareMessageIds('9-0', '10-0')).toBeLessThan(0);
    expect(compareMessageIds('10-2', '10-10')).toBeLessThan(0);
    expect(compareMessageIds('10-2', '10-2')).toBe(0);
  });
});
