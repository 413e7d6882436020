import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@service-relay/core';
import type { TenantEvent } from '@service-relay/tenant-events';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryMessageBus } from '../messaging/memory-message-bus';
import { MemoryPresenceStore } from '../presence/memory-presence-store';
import { TenantPurge, type TenantPurger } from './tenant-purge';

const logger = createLogger({ service: 't', level: 'silent' });
const A = '11111111-1111-4111-8111-111111111111';
const B = '22222222-2222-4222-8222-222222222222';
const deleted = (tenantId: string): TenantEvent => ({ seq: 9, tenant_id: tenantId, kind: 'deleted', version: 3, revoked_key_versions: [1] });

describe('TenantPurge', () => {
  it('runs every purger for a deleted change only, and counts it done', async () => {
    const calls: string[] = [];
    const outcomes: string[] = [];
    const purger = (name: string): TenantPurger => ({ name, purge: async (t) => void calls.push(`${name}:${t}`) });
    const purge = new TenantPurge({ purgers: [purger('history'), purger('presence')], logger, onOutcome: (o) => outcomes.push(o) });
    purge.onEvent({ ...deleted(A), kind: 'disabled' });
    await purge.settled();
    expect(calls).toEqual([]);
    purge.onEvent(deleted(A));
    await purge.settled();
    expect(calls).toEqual([`history:${A}`, `presence:${A}`]);
    expect(outcomes).toEqual(['done']);
  });

  it('never throws: a failing purger is retried in the background and the feed goes on', async () => {
    let failures = 1;
    const outcomes: string[] = [];
    const flaky: TenantPurger = {
      name: 'history',
      purge: async () => {
        if (failures-- > 0) throw new Error('redis down');
      },
    };
    const purge = new TenantPurge({ purgers: [flaky], logger, onOutcome: (o) => outcomes.push(o) });
    expect(() => purge.onEvent(deleted(A))).not.toThrow();
    await purge.settled();
    expect(outcomes).toEqual(['retrying', 'done']);
  });

  it('returns at once: a slow purge goes on after the change counts as applied (the feed is not current while a handler runs)', async () => {
    let release!: () => void;
    const slow: TenantPurger = { name: 'history', purge: () => new Promise<void>((resolve) => (release = resolve)) };
    const outcomes: string[] = [];
    const purge = new TenantPurge({ purgers: [slow], logger, onOutcome: (o) => outcomes.push(o) });
    expect(purge.onEvent(deleted(A))).toBeUndefined();
    expect(outcomes).toEqual([]);
    release();
    await purge.settled();
    expect(outcomes).toEqual(['done']);
  });
});

describe('the embedded stores purge a deleted tenant', () => {
  const dir = mkdtempSync(join(tmpdir(), 'realtime-purge-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('history: channels and idempotency keys go, and the journal on disk is rewritten without them; another tenant stays', async () => {
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 600 }, { dir });
    for (const t of [A, B]) {
      await bus.publish({ tenantId: t, channel: 'one' }, 'u', '{"n":1}', { idempotencyKey: 'k' });
      await bus.publish({ tenantId: t, channel: 'two' }, 'u', '{"n":2}');
    }
    expect(readFileSync(join(dir, 'journal.log'), 'utf8')).toContain(A);
    expect(await bus.purgeTenant(A)).toBe(2);
    expect(readFileSync(join(dir, 'journal.log'), 'utf8')).not.toContain(A);
    expect(readFileSync(join(dir, 'journal.log'), 'utf8')).toContain(B);
    expect((await bus.history({ tenantId: A, channel: 'one' }, { limit: 10 })).messages).toEqual([]);
    expect((await bus.history({ tenantId: B, channel: 'one' }, { limit: 10 })).messages).toHaveLength(1);
    // The idempotency key went with it: the same key stores a new message.
    const again = await bus.publish({ tenantId: A, channel: 'one' }, 'u', '{"n":3}', { idempotencyKey: 'k' });
    expect(again.dataJson).toBe('{"n":3}');
    await bus.close();
    // A restart reads nothing of the purged messages back.
    const reopened = new MemoryMessageBus({ maxMessages: 10, ttlS: 600 }, { dir });
    expect((await reopened.history({ tenantId: A, channel: 'two' }, { limit: 10 })).messages).toEqual([]);
    expect((await reopened.history({ tenantId: B, channel: 'two' }, { limit: 10 })).messages).toHaveLength(1);
    await reopened.close();
  });

  it('presence: the tenant has no members left, without leave events; another tenant keeps its own', async () => {
    const store = new MemoryPresenceStore();
    const events: unknown[] = [];
    await store.subscribe({ tenantId: A, channel: 'presence:x' }, (e) => events.push(e));
    await store.join({ tenantId: A, channel: 'presence:x' }, 'c1', 'ann', undefined);
    await store.join({ tenantId: B, channel: 'presence:x' }, 'c2', 'bob', undefined);
    events.length = 0;
    await store.purgeTenant(A);
    expect(await store.members({ tenantId: A, channel: 'presence:x' })).toEqual([]);
    expect(await store.members({ tenantId: B, channel: 'presence:x' })).toEqual([{ userId: 'bob', dataJson: undefined }]);
    expect(events).toEqual([]);
    // A late leave of the closed connection finds nothing.
    await store.leave({ tenantId: A, channel: 'presence:x' }, 'c1');
    expect(events).toEqual([]);
  });
});
