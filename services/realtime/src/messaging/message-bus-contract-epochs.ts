import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { ContractStore } from './message-bus-contract-store';
import type { Message } from './message';
import type { MessageBus } from './message-bus';
import { NO_EPOCH } from './recovery';

interface Handles {
  a: MessageBus;
  b: MessageBus;
  store: ContractStore;
  setBuses(next: [MessageBus, MessageBus]): void;
}

const ref = () => ({ tenantId: randomUUID(), channel: 'room.1' });
const LOST = { recovered: false, reason: 'history_lost' };
const TOO_OLD = { recovered: false, reason: 'too_old' };
const RECOVERED = { recovered: true };

/** Epochs and `recovered`: part of the MessageBus contract (retention: 5 messages, 60 s). */
export function describeEpochs(get: () => Handles): void {
  describe('epochs and recovery', () => {
    it('keeps one epoch for a stream while it lives, and none for a channel without one', async () => {
      const { a, b } = get();
      const r = ref();
      expect(await b.epoch(r)).toBe(NO_EPOCH);
      expect((await b.history(r, { limit: 10 })).epoch).toBe(NO_EPOCH);
      const m1 = await a.publish(r, 'u', '1');
      const epoch = await b.epoch(r);
      expect(epoch).not.toBe(NO_EPOCH);
      await a.publish(r, 'u', '2');
      expect(await a.epoch(r)).toBe(epoch);
      expect(await b.history(r, { after: m1.id, limit: 10 })).toMatchObject({ epoch, recovery: RECOVERED });
      expect(await b.history(r, { after: m1.id, epoch, limit: 10 })).toMatchObject({ epoch, recovery: RECOVERED });
      // An epoch of "no stream yet", sent back, is the same as none.
      expect((await b.history(r, { after: m1.id, epoch: NO_EPOCH, limit: 10 })).recovery).toEqual(RECOVERED);
      expect((await b.history(r, { limit: 10 })).recovery).toBeUndefined();
      expect(await b.epoch(ref())).toBe(NO_EPOCH);
    });

    it('recovers from the start of a channel, even an empty one', async () => {
      const { a, b } = get();
      const r = ref();
      expect((await b.history(r, { after: '0-0', limit: 10 })).recovery).toEqual(RECOVERED);
      await a.publish(r, 'u', '1');
      expect((await b.history(r, { after: '0-0', limit: 10 })).recovery).toEqual(RECOVERED);
    });

    it('says history_lost when the client names another epoch', async () => {
      const { a, b } = get();
      const r = ref();
      const m1 = await a.publish(r, 'u', '1');
      await a.publish(r, 'u', '2');
      const page = await b.history(r, { after: m1.id, epoch: 'some-other-epoch', limit: 10 });
      expect(page.recovery).toEqual(LOST);
      // What is retained is still served.
      expect(page.messages.map((m) => m.dataJson)).toEqual(['2']);
    });

    it('says history_lost when the stream began after `after`, too_old when the TTL explains the gap', async () => {
      const { a, b } = get();
      const r = ref();
      const m1 = await a.publish(r, 'u', '1');
      expect((await b.history(r, { after: `${m1.ms - 1000}-0`, limit: 10 })).recovery).toEqual(LOST);
      expect((await b.history(r, { after: `${m1.ms - 61_000}-0`, limit: 10 })).recovery).toEqual(TOO_OLD);
    });

    it('says history_lost for a missing stream within the TTL of `after`, too_old beyond it', async () => {
      const { a, b } = get();
      const r = ref();
      // The stores' clock: the id of a message just published elsewhere.
      const now = (await a.publish(ref(), 'u', 'clock')).ms;
      expect((await b.history(r, { after: `${now - 1000}-0`, limit: 10 })).recovery).toEqual(LOST);
      expect((await b.history(r, { after: `${now - 61_000}-0`, limit: 10 })).recovery).toEqual(TOO_OLD);
    });

    it("judges with the tenant's own history TTL when the read names one (#30)", async () => {
      const { a, b } = get();
      const r = ref();
      const now = (await a.publish(ref(), 'u', 'clock')).ms;
      // A tenant keeping 10 s: a 20 s gap is its retention, not a loss; one keeping 120 s: a 61 s gap is a loss.
      expect((await b.history(r, { after: `${now - 20_000}-0`, limit: 10, ttlS: 10 })).recovery).toEqual(TOO_OLD);
      expect((await b.history(r, { after: `${now - 61_000}-0`, limit: 10, ttlS: 120 })).recovery).toEqual(LOST);
      const m1 = await a.publish(r, 'u', '1');
      expect((await b.history(r, { after: `${m1.ms - 20_000}-0`, limit: 10, ttlS: 10 })).recovery).toEqual(TOO_OLD);
      expect((await b.history(r, { after: `${m1.ms - 20_000}-0`, limit: 10 })).recovery).toEqual(LOST);
    });

    it('says too_old when messages after `after` were trimmed, and replays what is left in order', async () => {
      const { a, b } = get();
      const r = ref();
      const sent: Message[] = [];
      for (let i = 0; i < 250; i++) sent.push(await a.publish(r, 'u', String(i)));
      const epoch = await b.epoch(r);
      const page = await b.history(r, { after: sent[0]!.id, epoch, limit: 1000 });
      expect(page.recovery).toEqual(TOO_OLD);
      expect((await b.history(r, { after: '0-0', limit: 1000 })).recovery).toEqual(TOO_OLD);
      const kept = page.messages.map((m) => m.id);
      expect(kept).toEqual(sent.slice(sent.length - kept.length).map((m) => m.id));
      // From the first message still kept, nothing is missing.
      expect((await b.history(r, { after: kept[0]!, epoch, limit: 1000 })).recovery).toEqual(RECOVERED);
    });

    it('starts a new epoch after the store lost the stream, and says history_lost', async () => {
      const h = get();
      const r = ref();
      const m1 = await h.a.publish(r, 'u', '1');
      const old = await h.a.epoch(r);
      const [a, b] = await h.store.loseEverything();
      h.setBuses([a, b]);
      expect(await b.epoch(r)).toBe(NO_EPOCH);
      expect((await b.history(r, { after: m1.id, limit: 10 })).recovery).toEqual(LOST);
      expect((await b.history(r, { after: m1.id, epoch: old, limit: 10 })).recovery).toEqual(LOST);
      const m2 = await a.publish(r, 'u', '2');
      const fresh = await b.epoch(r);
      expect(fresh).not.toBe(NO_EPOCH);
      expect(fresh).not.toBe(old);
      for (const epoch of [undefined, old]) {
        const page = await b.history(r, { after: m1.id, limit: 10, ...(epoch && { epoch }) });
        expect(page).toMatchObject({ epoch: fresh, recovery: LOST });
        expect(page.messages.map((m) => m.id)).toEqual([m2.id]);
      }
      expect((await b.history(r, { after: m2.id, epoch: fresh, limit: 10 })).recovery).toEqual(RECOVERED);
    });
  });
}

/** Idempotent publish: part of the MessageBus contract. */
export function describeIdempotency(get: () => { a: MessageBus; b: MessageBus }): void {
  describe('idempotent publish', () => {
    it('returns the first message for a known key and stores and delivers it once', async () => {
      const { a, b } = get();
      const r = ref();
      const seen: string[] = [];
      const stop = await b.subscribe(r, (m) => seen.push(m.id));
      const first = await a.publish(r, 'u1', '{"n":1}', { idempotencyKey: 'k-1' });
      const retry = await b.publish(r, 'u1', '{"n":1}', { idempotencyKey: 'k-1' });
      expect(retry).toMatchObject({ id: first.id, userId: 'u1', dataJson: '{"n":1}', createdAt: first.createdAt });
      const other = await a.publish(r, 'u1', '{"n":1}', { idempotencyKey: 'k-2' });
      const plain = await a.publish(r, 'u1', '{"n":1}');
      await until(() => seen.length === 3);
      expect(seen).toEqual([first.id, other.id, plain.id]);
      expect((await a.history(r, { limit: 10 })).messages.map((m) => m.id)).toEqual([first.id, other.id, plain.id]);
      stop();
    });

    it('scopes keys by tenant and channel', async () => {
      const { a } = get();
      const r1 = ref();
      const refs = [r1, { ...r1, channel: 'room.2' }, { ...ref(), channel: r1.channel }];
      for (const [i, r] of refs.entries()) await a.publish(r, 'u', String(i), { idempotencyKey: 'same' });
      for (const [i, r] of refs.entries()) expect((await a.history(r, { limit: 10 })).messages.map((m) => m.dataJson)).toEqual([String(i)]);
    });

    it('stores one message for concurrent publishes with one key', async () => {
      const { a, b } = get();
      const r = ref();
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).publish(r, 'u', '"x"', { idempotencyKey: 'burst' })));
      expect(new Set(results.map((m) => m.id)).size).toBe(1);
      expect((await a.history(r, { limit: 10 })).messages).toHaveLength(1);
    });
  });
}

async function until(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setImmediate(r));
  }
}
