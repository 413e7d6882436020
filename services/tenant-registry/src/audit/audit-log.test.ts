import { createLogger, ManualClock, RelayError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { UNAUTHENTICATED } from './admin-tokens';
import { AuditLog, type AuditWriteResult } from './audit-log';
import type { AuditEntry, AuditPage, AuditStore } from './audit-store';

type Entry = Omit<AuditEntry, 'suppressed'>;

const ENTRY: Entry = { actor: 'current:1a2b3c4d', action: 'disable', method: 'POST', tenantId: null, status: 200, error: null, requestId: 'req-1', clientAddress: '127.0.0.1' };

function setup(insert: (e: AuditEntry) => Promise<void>, opts: { perMinute?: number; writeTimeoutMs?: number } = {}) {
  const lines: string[] = [];
  const results: AuditWriteResult[] = [];
  const calls: string[] = [];
  const clock = new ManualClock(0);
  const store: Pick<AuditStore, 'insert' | 'list' | 'prune'> = {
    insert: (e) => {
      calls.push('insert');
      return insert(e);
    },
    list: async (): Promise<AuditPage> => {
      calls.push('list');
      return { records: [], next: null };
    },
    prune: async () => 0,
  };
  const logger = createLogger({ service: 'test', level: 'debug', destination: { write: (s: string) => void lines.push(s) } });
  const audit = new AuditLog(store, logger, { unauthenticatedPerMinute: opts.perMinute ?? 10, writeTimeoutMs: opts.writeTimeoutMs ?? 2000, clock, onWrite: (r) => void results.push(r) });
  return { audit, lines, results, calls, clock, logs: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe('AuditLog', () => {
  it('writes the entry before record() resolves', async () => {
    const written: AuditEntry[] = [];
    const t = setup(async (e) => void written.push(e));
    await t.audit.record(ENTRY);
    expect(written).toEqual([{ ...ENTRY, suppressed: 0 }]);
    expect(t.results).toEqual(['written']);
  });

  it('never rejects when the database is down: the failure is logged, with no secret', async () => {
    const t = setup(() => Promise.reject(new RelayError('unavailable', 'database unavailable')));
    await expect(t.audit.record({ ...ENTRY, status: 503, error: 'unavailable' })).resolves.toBeUndefined();
    expect(t.results).toEqual(['failed']);
    expect(t.logs()).toEqual([
      expect.objectContaining({ level: 50, msg: 'admin call not recorded in the audit log', req_id: 'req-1', actor: 'current:1a2b3c4d', action: 'disable', status: 503, error: 'unavailable', err: 'database unavailable' }),
    ]);
  });

  it('answers after the write timeout when the database hangs, and the listing still reads that write', async () => {
    let finish!: () => void;
    const t = setup(() => new Promise<void>((resolve) => (finish = resolve)), { writeTimeoutMs: 30 });
    const started = performance.now();
    await t.audit.record(ENTRY);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(t.logs()).toEqual([expect.objectContaining({ level: 40, msg: 'audit row not written in time; answering the admin call anyway' })]);
    const listing = t.audit.list(10);
    await new Promise((r) => setTimeout(r, 20));
    expect(t.calls).toEqual(['insert']);
    finish();
    await listing;
    expect(t.calls).toEqual(['insert', 'list']);
    expect(t.results).toEqual(['written']);
  });

  it('writes at most the limit of failed authentications a minute and counts the rest on the next row', async () => {
    const written: AuditEntry[] = [];
    const t = setup(async (e) => void written.push(e), { perMinute: 2 });
    const failed = { ...ENTRY, actor: UNAUTHENTICATED, status: 401, error: 'invalid_admin_token' };
    for (let i = 0; i < 50; i++) await t.audit.record(failed);
    await t.audit.record(ENTRY);
    expect(written.map((e) => [e.actor, e.suppressed])).toEqual([
      [UNAUTHENTICATED, 0],
      [UNAUTHENTICATED, 0],
      ['current:1a2b3c4d', 0],
    ]);
    expect(t.results.filter((r) => r === 'suppressed')).toHaveLength(48);
    // One warning a minute, not one a refusal.
    expect(t.logs().filter((l) => l.level === 40)).toHaveLength(1);
    t.clock.advance(60_000);
    await t.audit.record(failed);
    expect(written.at(-1)).toMatchObject({ actor: UNAUTHENTICATED, suppressed: 48 });
  });
});
