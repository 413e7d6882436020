import { createLogger } from '@service-relay/core';
import type { WebhookEventRecord } from '@service-relay/webhook-events';
import { describe, expect, it } from 'vitest';
import { ManualScheduler } from '../timers/scheduler';
import { WebhookTransitions } from './transitions';

const logger = createLogger({ service: 'test', level: 'silent' });

/** The embedded default's transitions (no Redis), every event handed to `events`. */
function transitions() {
  const events: string[] = [];
  const sink = (r: WebhookEventRecord) => events.push(`${r.type}:${r.tenantId}:${r.userId ?? '-'}`);
  const t = new WebhookTransitions({ url: undefined, prefix: 'relay:' } as never, { ttlMs: 9000, scheduler: new ManualScheduler(0), logger, sink });
  return { t, events };
}

const turn = () => new Promise<void>((r) => setImmediate(r));

describe('WebhookTransitions: user_connected and user_disconnected', () => {
  it("records a user's disconnect after the turn in which its last connection closed", async () => {
    const { t, events } = transitions();
    const [a, b] = [{}, {}];
    t.connected(a, 'T', 'u1');
    t.connected(b, 'T', 'u1');
    await turn();
    expect(events).toEqual(['user_connected:T:u1']);
    t.disconnected(a, 'T');
    t.disconnected(b, 'T');
    // Not in the turn that closed them (a disable's close frames go first)...
    expect(events).toEqual(['user_connected:T:u1']);
    // ...in the next one.
    await turn();
    expect(events).toEqual(['user_connected:T:u1', 'user_disconnected:T:u1']);
    t.disconnected(a, 'T');
    await turn();
    expect(events).toHaveLength(2);
  });

  it('a connection closed and another of the same user opened in one turn: the user never left', async () => {
    const { t, events } = transitions();
    const [a, b] = [{}, {}];
    t.connected(a, 'T', 'u1');
    t.disconnected(a, 'T');
    t.connected(b, 'T', 'u1');
    await turn();
    expect(events).toEqual(['user_connected:T:u1']);
  });

  it('a clean stop and a tenant purge record the leaves still waiting for their turn first', async () => {
    const { t, events } = transitions();
    const [a, b] = [{}, {}];
    t.connected(a, 'T', 'u1');
    t.connected(b, 'U', 'u2');
    t.disconnected(a, 'T');
    await t.purgeTenant('T');
    expect(events).toEqual(['user_connected:T:u1', 'user_connected:U:u2', 'user_disconnected:T:u1']);
    t.disconnected(b, 'U');
    await t.close();
    expect(events).toEqual(['user_connected:T:u1', 'user_connected:U:u2', 'user_disconnected:T:u1', 'user_disconnected:U:u2']);
  });
});
