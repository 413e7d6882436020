import { describe, expect, it } from 'vitest';
import { nowMs, stampReader, stampedPayload } from './latency-probe';

describe('latency probe', () => {
  it('stamps a payload of the asked size', () => {
    const p = stampedPayload(1234.5678, 100);
    expect(p).toHaveLength(100);
    expect(p.startsWith('@1234.568x')).toBe(true);
  });

  it('reads one latency per stamped message: a compact batch, NATS MSGs, a stamp split across frames', () => {
    const got: number[] = [];
    const read = stampReader((ms) => got.push(ms));
    const sent = nowMs() - 5;
    const a = stampedPayload(sent, 100);
    read(Buffer.from(`{"type":"batch","topic":"tenants/t/channels/c","frames":[{"id":"1-0","user_id":"u","data":"${a}","created_at":"1970-01-01T00:00:00.001Z"},{"id":"1-1","user_id":"u","data":"${a}","created_at":"1970-01-01T00:00:00.001Z"}]}`));
    expect(got).toHaveLength(2);
    const msgs = Buffer.from(`MSG bench.latency 1 100\r\n${a}\r\nMSG bench.latency 1 100\r\n${a}\r\n`);
    read(msgs.subarray(0, 30));
    read(msgs.subarray(30));
    expect(got).toHaveLength(4);
    for (const ms of got) {
      expect(ms).toBeGreaterThanOrEqual(4.9);
      expect(ms).toBeLessThan(1000);
    }
  });
});
