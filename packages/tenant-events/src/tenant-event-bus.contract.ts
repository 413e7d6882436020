import { afterEach, expect, it } from 'vitest';
import type { TenantEventBus } from './tenant-event-bus';

export interface BusFixture {
  /** A bus that announces, and `consumers` buses (or consumer slots) that listen. */
  create(consumers: number): Promise<{ publisher: TenantEventBus; consumers: TenantEventBus[] }>;
}

/** Resolves with the next notice a bus hands to its handlers. */
function nextNotice(bus: TenantEventBus): Promise<number | undefined> {
  return new Promise((resolve) => {
    const off = bus.onNotice((seq) => {
      off();
      resolve(seq);
    });
  });
}

/** The behaviour every TenantEventBus driver must have. */
export function tenantEventBusContract(fixture: BusFixture): void {
  const opened: TenantEventBus[] = [];
  const create = async (n: number) => {
    const f = await fixture.create(n);
    opened.push(f.publisher, ...f.consumers);
    return f;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((b) => b.close()));
  });

  it('hands an announced sequence to every consumer', async () => {
    const { publisher, consumers } = await create(2);
    const got = consumers.map((c) => nextNotice(c));
    await Promise.all(consumers.map((c) => c.ready()));
    await publisher.notify(42);
    expect(await Promise.all(got)).toEqual([42, 42]);
  });

  it('stops handing notices to a handler after it unsubscribed', async () => {
    const { publisher, consumers } = await create(1);
    const seen: Array<number | undefined> = [];
    const off = consumers[0]!.onNotice((s) => void seen.push(s));
    const later = nextNotice(consumers[0]!);
    await consumers[0]!.ready();
    off();
    await publisher.notify(7);
    expect(await later).toBe(7);
    expect(seen).toEqual([]);
  });

  it('reports itself ready and connected', async () => {
    const { consumers } = await create(1);
    consumers[0]!.onNotice(() => {});
    expect(await consumers[0]!.ready()).toBe(true);
    expect(consumers[0]!.isConnected()).toBe(true);
  });
}
