import { createLogger } from '../logger';
import { describe, expect, it } from 'vitest';
import { UsageFlusher, type UsageFlush } from './usage-flusher';
import { HOUR_MS, UsageMeter } from './usage-meter';

const T = 'c0a80101-0000-4000-8000-000000000001';
const U = 'c0a80101-0000-4000-8000-000000000002';
const H0 = Date.parse('2030-01-01T10:00:00Z');
const logger = createLogger({ service: 'test', level: 'silent' });

describe('usage meter', () => {
  it('counts publishes by source, deliveries, bytes, refusals; cuts into the hour the period began in and restarts at zero', () => {
    let now = H0 + 1000;
    const meter = new UsageMeter(() => now);
    meter.published(T, 'ws', 10);
    meter.published(T, 'rest', 5);
    meter.published(T, 'host', 1);
    meter.refused(T, 'publish_rate');
    meter.refused(T, 'publish_rate');
    const t = meter.tenant(T);
    t.deliveries += 3;
    t.bytesOut += 300;
    now = H0 + HOUR_MS - 1;
    expect(meter.cut()).toEqual([
      { tenantId: T, hourMs: H0, publishedRest: 1, publishedWs: 1, publishedHost: 1, deliveries: 3, bytesIn: 16, bytesOut: 300, peakConnections: 0, connectionMs: 0, refusals: { publish_rate: 2 } },
    ]);
    expect(meter.cut()).toEqual([]);
    expect(meter.size).toBe(0);
  });

  it('connection time is exact per period (open before, open across, opened and closed within) and the peak restarts at what is open', () => {
    let now = H0;
    const meter = new UsageMeter(() => now);
    const a = meter.connected(T);
    now += 1000;
    const b = meter.connected(T);
    meter.connected(U);
    now += 500;
    meter.disconnected(b);
    now += 500;
    // T: a 2000 + b 500; U: 1000.
    const first = meter.cut();
    expect(first.map((r) => [r.tenantId, r.connectionMs, r.peakConnections])).toEqual([
      [T, 2500, 2],
      [U, 1000, 1],
    ]);
    now += 4000;
    meter.disconnected(a);
    now += 4000;
    const second = meter.cut();
    expect(second.map((r) => [r.tenantId, r.connectionMs, r.peakConnections])).toEqual([
      [T, 4000, 1],
      [U, 8000, 1],
    ]);
  });
});

describe('usage flusher', () => {
  it('keeps a failed flush under its id, sends it again, and gathers later counts into the next flush', async () => {
    const meter = new UsageMeter();
    const sent: UsageFlush[] = [];
    let fail = true;
    const flusher = new UsageFlusher({
      meter,
      instanceId: 'i',
      intervalMs: 60_000,
      maxPendingRecords: 10,
      logger,
      sink: async (f) => {
        sent.push(structuredClone(f));
        if (fail) throw new Error('registry down');
      },
    });
    meter.published(T, 'ws', 1);
    await flusher.flush();
    meter.published(T, 'ws', 1);
    meter.published(U, 'ws', 1);
    await flusher.flush();
    expect(sent.map((f) => f.flushId)).toEqual(['i:1', 'i:1']);
    expect(sent[1]!.records).toEqual(sent[0]!.records);
    expect(flusher.backlog).toBe(3);
    fail = false;
    await flusher.stop();
    expect(sent.map((f) => f.flushId)).toEqual(['i:1', 'i:1', 'i:1', 'i:2']);
    expect(sent[3]!.records.map((r) => [r.tenantId, r.publishedWs])).toEqual([
      [T, 1],
      [U, 1],
    ]);
    expect(flusher.backlog).toBe(0);
  });

  it('drops counts past the backlog bound instead of growing', async () => {
    const meter = new UsageMeter();
    const dropped: number[] = [];
    const flusher = new UsageFlusher({ meter, instanceId: 'i', intervalMs: 60_000, maxPendingRecords: 1, logger, sink: () => Promise.reject(new Error('down')), onFlush: (r, n) => r === 'dropped' && dropped.push(n) });
    meter.published(T, 'ws', 1);
    await flusher.flush();
    meter.published(U, 'ws', 1);
    await flusher.flush();
    expect(flusher.backlog).toBe(1);
    expect(dropped).toEqual([1]);
  });
});
