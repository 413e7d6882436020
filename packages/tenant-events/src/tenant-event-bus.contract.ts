import { randomUUID } from 'node:crypto';
import { afterEach, expect, it } from 'vitest';
import type { TenantEvent } from './tenant-event';
import type { TenantEventBus } from './tenant-event-bus';

export interface BusFixture {
  /** A bus that publishes, and `consumers` buses (or consumer slots) that subscribe. */
  create(consumers: number): Promise<{ publisher: TenantEventBus; consumers: TenantEventBus[] }>;
}

const event = (over: Partial<TenantEvent> = {}): Omit<TenantEvent, 'event_id'> => ({
  tenant_id: randomUUID(),
  kind: 'disabled',
  version: 2,
  revoked_key_versions: [],
  ...over,
});

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

  it('publish returns only after every consumer finished applying the event', async () => {
    const { publisher, consumers } = await create(2);
    const applied: string[] = [];
    consumers.forEach((c, i) =>
      c.subscribe(async (e) => {
        await new Promise((r) => setImmediate(r));
        applied.push(`${i}:${e.tenant_id}:${e.kind}:${e.version}`);
      }),
    );
    await Promise.all(consumers.map((c) => c.ready()));
    const e = event({ kind: 'previous_expired', version: 5, revoked_key_versions: [3] });
    const result = await publisher.publish(e);
    expect(result).toEqual({ delivered: 2, acknowledged: 2 });
    expect(applied.sort()).toEqual([`0:${e.tenant_id}:previous_expired:5`, `1:${e.tenant_id}:previous_expired:5`]);
  });

  it('delivers every field and a fresh event id', async () => {
    const { publisher, consumers } = await create(1);
    const got: TenantEvent[] = [];
    consumers[0]!.subscribe((e) => void got.push(e));
    await consumers[0]!.ready();
    const e = event({ kind: 'revoked_all', version: 9, revoked_key_versions: [7, 8] });
    await publisher.publish(e);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject(e);
    expect(got[0]!.event_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a failing consumer does not block the others and is not counted as applied', async () => {
    const { publisher, consumers } = await create(2);
    let applied = 0;
    consumers[0]!.subscribe(() => {
      throw new Error('consumer broke');
    });
    consumers[1]!.subscribe(() => void applied++);
    await Promise.all(consumers.map((c) => c.ready()));
    const result = await publisher.publish(event());
    expect(applied).toBe(1);
    expect(result).toEqual({ delivered: 2, acknowledged: 1 });
  });

  it('stops delivering after unsubscribe', async () => {
    const { publisher, consumers } = await create(1);
    let seen = 0;
    const off = consumers[0]!.subscribe(() => void seen++);
    await consumers[0]!.ready();
    await publisher.publish(event());
    off();
    await publisher.publish(event());
    expect(seen).toBe(1);
  });
}
