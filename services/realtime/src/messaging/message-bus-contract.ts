import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { compareMessageIds, isMessageId } from './message-id';
import type { Message } from './message';
import type { MessageBus } from './message-bus';
import { describeEpochs, describeIdempotency } from './message-bus-contract-epochs';
import type { ContractStore } from './message-bus-contract-store';

export type { ContractStore } from './message-bus-contract-store';

/** The behaviour every MessageBus driver must show. Retention is `maxMessages` and a 60 s TTL. */
export function describeMessageBusContract(driver: string, open: (maxMessages: number) => Promise<ContractStore>): void {
  describe(`MessageBus contract: ${driver}`, () => {
    let a: MessageBus;
    let b: MessageBus;
    let store: ContractStore;
    const ref = () => ({ tenantId: randomUUID(), channel: 'room.1' });

    beforeEach(async () => {
      store = await open(5);
      [a, b] = store.buses;
    });
    afterEach(async () => {
      await a.close();
      if (b !== a) await b.close();
    });

    it('publishes messages with increasing ids of the Redis Stream shape', async () => {
      const r = ref();
      const m1 = await a.publish(r, 'u1', '{"n":1}');
      const m2 = await a.publish(r, 'u2', '"two"');
      expect(isMessageId(m1.id)).toBe(true);
      expect(compareMessageIds(m2.id, m1.id)).toBeGreaterThan(0);
      expect(m1).toMatchObject({ channel: 'room.1', userId: 'u1', dataJson: '{"n":1}' });
      expect(Number.isNaN(Date.parse(m1.createdAt))).toBe(false);
    });

    it('answers history oldest first: the latest `limit`, or the first `limit` after an id', async () => {
      const r = ref();
      const sent: Message[] = [];
      for (let i = 0; i < 5; i++) sent.push(await a.publish(r, 'u', String(i)));
      expect((await b.history(r, { limit: 2 })).messages.map((m) => m.dataJson)).toEqual(['3', '4']);
      expect((await b.history(r, { after: sent[1]!.id, limit: 2 })).messages.map((m) => m.dataJson)).toEqual(['2', '3']);
      expect((await b.history(r, { after: sent[4]!.id, limit: 10 })).messages).toEqual([]);
      expect((await b.history(r, { after: '0-0', limit: 10 })).messages.map((m) => m.id)).toEqual(sent.map((m) => m.id));
    });

    it('keeps at least the configured number of messages, the newest ones', async () => {
      const r = ref();
      let last: Message | undefined;
      // Redis trims whole stream nodes (100 entries by default), so publish past a few.
      for (let i = 0; i < 250; i++) last = await a.publish(r, 'u', String(i));
      const { messages: kept } = await a.history(r, { after: '0-0', limit: 1000 });
      expect(kept.length).toBeGreaterThanOrEqual(5);
      expect(kept.length).toBeLessThan(250);
      expect(kept[kept.length - 1]!.id).toBe(last!.id);
    });

    it('keeps tenants apart even for the same channel name', async () => {
      const r1 = ref();
      const r2 = { ...ref(), channel: r1.channel };
      const got: string[] = [];
      const stop = await b.subscribe(r2, (m) => got.push(m.dataJson));
      await a.publish(r1, 'u', '"t1"');
      await a.publish(r2, 'u', '"t2"');
      await until(() => got.length === 1);
      expect(got).toEqual(['"t2"']);
      expect((await a.history(r1, { limit: 10 })).messages.map((m) => m.dataJson)).toEqual(['"t1"']);
      stop();
    });

    it('delivers to every listener on every instance until each stops', async () => {
      const r = ref();
      const onA: string[] = [];
      const onB1: string[] = [];
      const onB2: string[] = [];
      const stopA = await a.subscribe(r, (m) => onA.push(m.dataJson));
      const stopB1 = await b.subscribe(r, (m) => onB1.push(m.dataJson));
      const stopB2 = await b.subscribe(r, (m) => onB2.push(m.dataJson));
      await a.publish(r, 'u', '1');
      await until(() => onA.length === 1 && onB1.length === 1 && onB2.length === 1);
      stopB1();
      await b.publish(r, 'u', '2');
      await until(() => onA.length === 2 && onB2.length === 2);
      stopA();
      stopB2();
      // A marker on a fresh listener proves the stopped ones would have had '3' by now.
      const marker: string[] = [];
      const stopM = await a.subscribe(r, (m) => marker.push(m.dataJson));
      await b.publish(r, 'u', '3');
      await until(() => marker.length === 1);
      expect([onA, onB1, onB2]).toEqual([['1', '2'], ['1'], ['1', '2']]);
      stopM();
    });

    it('delivers in id order on every instance while both publish concurrently', async () => {
      const r = ref();
      const seenA: string[] = [];
      const seenB: string[] = [];
      const stopA = await a.subscribe(r, (m) => seenA.push(m.id));
      const stopB = await b.subscribe(r, (m) => seenB.push(m.id));
      const n = 200;
      await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 ? a : b).publish(r, 'u', String(i))));
      await until(() => seenA.length === n && seenB.length === n);
      const sorted = [...seenA].sort(compareMessageIds);
      expect(seenA).toEqual(sorted);
      expect(seenB).toEqual(sorted);
      expect(new Set(seenA).size).toBe(n);
      stopA();
      stopB();
    });
    describeEpochs(() => ({ a, b, store, setBuses: (next) => ([a, b] = next) }));
    describeIdempotency(() => ({ a, b }));
  });
}

/** Waits for a condition driven by I/O; polls on the event loop, not on a fixed sleep. */
async function until(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setImmediate(r));
  }
}
