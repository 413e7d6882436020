import { afterEach, describe, expect, it } from 'vitest';
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@service-relay/core';
import { describeMessageBusContract } from './message-bus-contract';
import { MemoryMessageBus, type MemoryBusOptions } from './memory-message-bus';
import { compareMessageIds } from './message-id';
import type { MessageBus } from './message-bus';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-history-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describeMessageBusContract('memory', async (maxMessages) => {
  const retention = { maxMessages, ttlS: 60 };
  const bus = new MemoryMessageBus(retention, { dir: tempDir() });
  return {
    buses: [bus, bus],
    async loseEverything() {
      await bus.close();
      const next = new MemoryMessageBus(retention, { dir: tempDir() });
      return [next, next];
    },
  };
});

describeMessageBusContract('memory without a journal', async (maxMessages) => {
  const bus = new MemoryMessageBus({ maxMessages, ttlS: 60 });
  return {
    buses: [bus, bus],
    async loseEverything() {
      const next = new MemoryMessageBus({ maxMessages, ttlS: 60 });
      return [next, next];
    },
  };
});

describe('MemoryMessageBus', () => {
  const ref = { tenantId: '00000000-0000-4000-8000-000000000001', channel: 'c' };
  const open = (dir: string, opts: MemoryBusOptions = {}) => new MemoryMessageBus({ maxMessages: 10, ttlS: 60 }, { dir, ...opts });
  const ids = async (bus: MessageBus) => (await bus.history(ref, { after: '0-0', limit: 100 })).messages.map((m) => m.id);

  it('never lets ids go backwards when the clock does', async () => {
    const clock = new ManualClock(10_000);
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 }, { clock });
    const m1 = await bus.publish(ref, 'u', '1');
    const m2 = await bus.publish(ref, 'u', '2');
    clock.set(5_000);
    const m3 = await bus.publish(ref, 'u', '3');
    expect([m1.id, m2.id, m3.id]).toEqual(['10000-0', '10000-1', '10000-2']);
    clock.set(10_001);
    expect((await bus.publish(ref, 'u', '4')).id).toBe('10001-0');
  });

  it('drops a channel idle for longer than the TTL, and says too_old for a position older than it', async () => {
    const clock = new ManualClock(1_000_000);
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 }, { clock });
    const m1 = await bus.publish(ref, 'u', '1');
    clock.advance(59_999);
    expect((await bus.history(ref, { limit: 10 })).messages).toHaveLength(1);
    clock.advance(1);
    expect(await bus.history(ref, { after: m1.id, limit: 10 })).toEqual({ messages: [], epoch: '', recovery: { recovered: false, reason: 'too_old' } });
    // A new stream after the idle expiry: the gap is the TTL's doing.
    await bus.publish(ref, 'u', '2');
    expect((await bus.history(ref, { after: m1.id, limit: 10 })).recovery).toEqual({ recovered: false, reason: 'too_old' });
  });

  it('forgets an idempotency key after the window', async () => {
    const clock = new ManualClock(1_000_000);
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 3600 }, { clock, idempotencyWindowS: 600 });
    const first = await bus.publish(ref, 'u', '1', { idempotencyKey: 'k' });
    clock.advance(599_999);
    expect((await bus.publish(ref, 'u', '1', { idempotencyKey: 'k' })).id).toBe(first.id);
    clock.advance(2);
    expect((await bus.publish(ref, 'u', '1', { idempotencyKey: 'k' })).id).not.toBe(first.id);
  });

  it('keeps history, epochs and idempotency keys across a clean restart', async () => {
    const dir = tempDir();
    const bus = open(dir);
    const m1 = await bus.publish(ref, 'u', '{"a":[1,"x"]}', { idempotencyKey: 'k' });
    const m2 = await bus.publish(ref, 'u', '2');
    const epoch = await bus.epoch(ref);
    await bus.close();
    const again = open(dir);
    expect(await ids(again)).toEqual([m1.id, m2.id]);
    expect((await again.history(ref, { limit: 1 })).messages[0]).toEqual(m2);
    expect(await again.history(ref, { after: m2.id, epoch, limit: 10 })).toMatchObject({ epoch, recovery: { recovered: true } });
    expect((await again.publish(ref, 'u', 'retry', { idempotencyKey: 'k' })).id).toBe(m1.id);
    const m3 = await again.publish(ref, 'u', '3');
    expect(compareMessageIds(m3.id, m2.id)).toBeGreaterThan(0);
    await again.close();
  });

  it('acknowledges a publish only once its journal line is written', async () => {
    const dir = tempDir();
    const bus = open(dir);
    const m = await bus.publish(ref, 'u', '"durable"');
    expect(readFileSync(join(dir, 'journal.log'), 'utf8')).toContain(`"i":"${m.id}"`);
    await bus.close();
  });

  it('delivers the publishes of one turn together, though each reaches the journal through its own promise chain', async () => {
    // A socket read carrying several publishes: each goes through awaits before the bus (authorization, rules).
    // Delivered in one pass, a subscriber's connection sends them as one batch frame; the first one alone cost a frame of its own.
    const bus = open(tempDir());
    const seen: string[] = [];
    await bus.subscribe(ref, (m) => {
      if (seen.length === 0) process.nextTick(() => seen.push('next tick'));
      seen.push(m.dataJson);
    });
    const later = async (data: string, hops: number) => {
      for (let i = 0; i < hops; i++) await null;
      return bus.publish(ref, 'u', data);
    };
    await Promise.all([bus.publish(ref, 'u', '1'), later('2', 1), later('3', 3)]);
    expect(seen).toEqual(['1', '2', '3', 'next tick']);
    await bus.close();
  });

  it('gives every restored channel a new epoch after an unclean stop, and still serves its history', async () => {
    for (const damage of ['none', 'torn tail', 'garbage line']) {
      const dir = tempDir();
      const bus = open(dir);
      const m1 = await bus.publish(ref, 'u', '1');
      const m2 = await bus.publish(ref, 'u', '2');
      const epoch = await bus.epoch(ref);
      // A copy taken while the process runs is what a crash leaves: no clean-shutdown line.
      const crashed = tempDir();
      copyFileSync(join(dir, 'journal.log'), join(crashed, 'journal.log'));
      await bus.close();
      if (damage === 'torn tail') appendFileSync(join(crashed, 'journal.log'), '0badc0de {"r":"m","t":"x');
      if (damage === 'garbage line') appendFileSync(join(crashed, 'journal.log'), 'not a record\n');
      const after = open(crashed);
      expect(await ids(after)).toEqual([m1.id, m2.id]);
      const fresh = await after.epoch(ref);
      expect(fresh).not.toBe(epoch);
      for (const q of [{ after: m2.id }, { after: m2.id, epoch }, { after: m1.id, epoch }]) {
        expect((await after.history(ref, { ...q, limit: 10 })).recovery).toEqual({ recovered: false, reason: 'history_lost' });
      }
      const m3 = await after.publish(ref, 'u', '3');
      expect(compareMessageIds(m3.id, m2.id)).toBeGreaterThan(0);
      expect((await after.history(ref, { after: m3.id, epoch: fresh, limit: 10 })).recovery).toEqual({ recovered: true });
      await after.close();
    }
  });

  it('says history_lost when its journal is missing', async () => {
    const dir = tempDir();
    const bus = open(dir);
    const m1 = await bus.publish(ref, 'u', '1');
    await bus.close();
    rmSync(join(dir, 'journal.log'));
    const after = open(dir);
    expect(await after.history(ref, { after: m1.id, limit: 10 })).toEqual({ messages: [], epoch: '', recovery: { recovered: false, reason: 'history_lost' } });
    await after.close();
  });

  it('compacts its journal so it stays bounded by retention', async () => {
    const dir = tempDir();
    const bus = open(dir, { compactAfterBytes: 4096 });
    const payload = JSON.stringify('x'.repeat(200));
    let last = '';
    for (let i = 0; i < 500; i++) last = (await bus.publish(ref, 'u', payload)).id;
    // Ten messages of ~300 bytes are retained: the file holds a snapshot plus at most the threshold.
    expect(statSync(join(dir, 'journal.log')).size).toBeLessThan(4096 + 3 * 11 * 400);
    const kept = await ids(bus);
    await bus.close();
    const again = open(dir);
    expect(await ids(again)).toEqual(kept);
    expect(kept[kept.length - 1]).toBe(last);
    await again.close();
  });

  it('refuses a directory another live process holds', () => {
    const dir = tempDir();
    mkdirSync(dir, { recursive: true });
    // PID 1 is always alive (and never this test).
    writeFileSync(join(dir, 'journal.lock'), '1');
    expect(() => open(dir)).toThrow(/in use by process 1/);
  });

  it('compares ids numerically, not as strings', () => {
    expect(compareMessageIds('9-0', '10-0')).toBeLessThan(0);
    expect(compareMessageIds('10-2', '10-10')).toBeLessThan(0);
    expect(compareMessageIds('10-2', '10-2')).toBe(0);
  });
});
