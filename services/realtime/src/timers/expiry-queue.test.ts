import { describe, expect, it } from 'vitest';
import { ExpiryQueue } from './expiry-queue';
import { ManualScheduler, timerScheduler } from './scheduler';

const item = (log: string[], name: string, fail = false) => ({
  expire: () => {
    log.push(name);
    if (fail) throw new Error(`${name} failed`);
  },
});

describe('ExpiryQueue', () => {
  it('expires items at their time, items due together sharing one scheduler entry', () => {
    const clock = new ManualScheduler(0);
    const queue = new ExpiryQueue(clock);
    const log: string[] = [];
    queue.add(item(log, 'a'), 1000);
    queue.add(item(log, 'b'), 1000);
    queue.add(item(log, 'c'), 2000);
    expect(queue.size).toBe(2);
    clock.advance(999);
    expect(log).toEqual([]);
    clock.advance(1);
    expect(log).toEqual(['a', 'b']);
    expect(queue.size).toBe(1);
    clock.advance(1000);
    expect(log).toEqual(['a', 'b', 'c']);
    expect(queue.size).toBe(0);
  });

  it('a deleted item never expires, and its time is dropped once nothing is due then', () => {
    const clock = new ManualScheduler(0);
    const queue = new ExpiryQueue(clock);
    const log: string[] = [];
    const a = item(log, 'a');
    const b = item(log, 'b');
    queue.add(a, 1000);
    queue.add(b, 1000);
    queue.delete(a, 1000);
    expect(queue.size).toBe(1);
    queue.delete(b, 1000);
    expect(queue.size).toBe(0);
    queue.delete(b, 1000);
    clock.advance(5000);
    expect(log).toEqual([]);
  });

  it('every item due expires even when one throws; the error still surfaces', () => {
    const clock = new ManualScheduler(0);
    const queue = new ExpiryQueue(clock);
    const log: string[] = [];
    queue.add(item(log, 'a', true), 1000);
    queue.add(item(log, 'b'), 1000);
    expect(() => clock.advance(1000)).toThrow('a failed');
    expect(log).toEqual(['a', 'b']);
    expect(queue.size).toBe(0);
  });

  it('on real timers, a time already past expires the item at once and leaves nothing behind', () => {
    const queue = new ExpiryQueue(timerScheduler());
    const log: string[] = [];
    queue.add(item(log, 'late'), Date.now() - 1);
    expect(log).toEqual(['late']);
    expect(queue.size).toBe(0);
  });
});
