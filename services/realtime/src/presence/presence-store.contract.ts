import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ChannelRef } from '../messaging/message';
import type { PresenceEvent, PresenceStore, StoredMember } from './presence-store';

/** Two handles on one presence (two instances; for the memory driver one object twice). */
export interface PresenceStoreFixture {
  make(): Promise<{ a: PresenceStore; b: PresenceStore; distinct: boolean }>;
}

/** Every event of a channel, in arrival order, with a bounded wait for the n-th. */
export async function recordEvents(store: PresenceStore, ref: ChannelRef): Promise<{ events: PresenceEvent[]; upTo(n: number, timeoutMs?: number): Promise<PresenceEvent[]>; stop: () => void }> {
  const events: PresenceEvent[] = [];
  let wake: (() => void) | undefined;
  const stop = await store.subscribe(ref, (e) => {
    events.push(e);
    wake?.();
  });
  const upTo = async (n: number, timeoutMs = 5000) => {
    const deadline = Date.now() + timeoutMs;
    while (events.length < n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`only ${events.length} of ${n} presence events: ${JSON.stringify(events)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
    return events.slice(0, n);
  };
  return { events, upTo, stop };
}

export const sorted = (members: StoredMember[]) => [...members].sort((x, y) => (x.userId < y.userId ? -1 : x.userId > y.userId ? 1 : 0));
const channel = (): ChannelRef => ({ tenantId: randomUUID(), channel: `presence:${randomUUID().slice(0, 8)}` });

/** The behaviour every PresenceStore driver has. */
export function presenceStoreContract(name: string, fixture: PresenceStoreFixture): void {
  describe(`PresenceStore contract: ${name}`, () => {
    it('one member per user across connections and instances; join on the first connection, leave after the last; data of the latest join', async () => {
      const { a, b } = await fixture.make();
      const ref = channel();
      const [u1, u2] = [randomUUID(), randomUUID()];
      const seen = await recordEvents(b, ref);
      await a.join(ref, 'c1', u1, '{"name":"one"}');
      await b.join(ref, 'c2', u1, '{"name":"one, again"}');
      await a.join(ref, 'c3', u2, undefined);
      // In store order, so a join for u1's second connection would come before u2's.
      expect(await seen.upTo(2)).toEqual([
        { type: 'join', userId: u1, dataJson: '{"name":"one"}' },
        { type: 'join', userId: u2, dataJson: undefined },
      ]);
      expect(sorted(await a.members(ref))).toEqual(sorted([{ userId: u1, dataJson: '{"name":"one, again"}' }, { userId: u2, dataJson: undefined }]));
      expect(sorted(await b.members(ref))).toEqual(sorted(await a.members(ref)));
      await a.leave(ref, 'c1');
      await a.leave(ref, 'c3');
      expect(await seen.upTo(3)).toEqual(expect.arrayContaining([{ type: 'leave', userId: u2 }]));
      expect(await b.members(ref)).toEqual([{ userId: u1, dataJson: '{"name":"one, again"}' }]);
      await b.leave(ref, 'c2');
      expect((await seen.upTo(4))[3]).toEqual({ type: 'leave', userId: u1 });
      expect(await a.members(ref)).toEqual([]);
      seen.stop();
    });

    it('a connection joins once (a repeat changes nothing), a leave of a non-member does nothing, channels and tenants are apart', async () => {
      const { a, b } = await fixture.make();
      const ref = channel();
      const other = { tenantId: randomUUID(), channel: ref.channel };
      const u = randomUUID();
      const seen = await recordEvents(a, ref);
      await a.join(ref, 'c1', u, '{"v":1}');
      await a.join(ref, 'c1', u, '{"v":2}');
      await a.leave(ref, 'nobody');
      await b.leave(ref, 'c1-elsewhere');
      expect(await a.members(other)).toEqual([]);
      expect(await b.members({ tenantId: ref.tenantId, channel: `${ref.channel}x` })).toEqual([]);
      await a.leave(ref, 'c1');
      expect(await seen.upTo(2)).toEqual([
        { type: 'join', userId: u, dataJson: '{"v":1}' },
        { type: 'leave', userId: u },
      ]);
      expect(await b.members(ref)).toEqual([]);
      seen.stop();
    });

    it('close() removes every member of the instance at once, with leave events; others stay', async () => {
      const { a, b, distinct } = await fixture.make();
      const ref = channel();
      const [gone, stays] = [randomUUID(), randomUUID()];
      const seen = await recordEvents(b, ref);
      await a.join(ref, 'c1', gone, undefined);
      await a.join(ref, 'c2', gone, undefined);
      if (distinct) await b.join(ref, 'c3', stays, '{}');
      await seen.upTo(distinct ? 2 : 1);
      await a.close();
      expect((await seen.upTo(distinct ? 3 : 2)).at(-1)).toEqual({ type: 'leave', userId: gone });
      expect(await b.members(ref)).toEqual(distinct ? [{ userId: stays, dataJson: '{}' }] : []);
      seen.stop();
    });
  });
}
