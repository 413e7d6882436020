import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/**
 * Send→delivery latency of timestamped messages, for the `latency` scenario.
 *
 * The publisher puts its send time into each message's payload as `@<ms>`
 * followed by `x` padding up to the message size. The clock is the system's
 * monotonic one (process.hrtime, CLOCK_MONOTONIC on Linux), which every
 * process on the machine reads alike, so a subscriber in another process
 * subtracts it from its own reading when the frame arrives. `@` appears in no
 * other part of our frames or of a NATS `MSG`, so the probe finds the stamps
 * in any protocol's frame without parsing it: one per message, several in a
 * batch frame or a frame of several `MSG`s.
 */

export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** The payload of a message sent at `atMs`, `bytes` long (the stamp, then padding). */
export function stampedPayload(atMs: number, bytes: number): string {
  const stamp = `@${atMs.toFixed(3)}`;
  return stamp + 'x'.repeat(Math.max(1, bytes - stamp.length));
}

const AT = 0x40; // '@'
const DOT = 0x2e;

/**
 * A per-socket reader of stamps: calls `sample(latencyMs)` for every stamp in
 * a frame. A stamp cut off at the end of a frame (a peer may split its
 * stream into frames anywhere) is completed from the next one.
 */
export function stampReader(sample: (latencyMs: number) => void): (data: Buffer) => void {
  let carry: Buffer | undefined;
  return (frame) => {
    const at = nowMs();
    const data = carry ? Buffer.concat([carry, frame]) : frame;
    carry = undefined;
    for (let i = data.indexOf(AT); i !== -1; i = data.indexOf(AT, i + 1)) {
      let value = 0;
      let scale = 0;
      let j = i + 1;
      for (; j < data.length; j++) {
        const c = data[j]!;
        if (c === DOT) scale = 1;
        else if (c >= 0x30 && c <= 0x39) {
          value = value * 10 + (c - 0x30);
          if (scale > 0) scale *= 10;
        } else break;
      }
      if (j === data.length) {
        carry = Buffer.from(data.subarray(i));
        return;
      }
      sample(at - value / Math.max(1, scale));
    }
  };
}

/** Latencies collected in one client process since the last take, and its own event-loop delay meanwhile. */
export class LatencyLog {
  private samples: number[] = [];
  private delay: IntervalHistogram | undefined;

  readonly add = (ms: number): void => {
    this.samples.push(ms);
  };

  reset(): void {
    this.samples = [];
    this.delay?.disable();
    this.delay = monitorEventLoopDelay({ resolution: 1 });
    this.delay.enable();
  }

  /** The samples (ms, rounded to µs) and the process's event-loop delay p99/max (ms) since reset. */
  take(): { samples: number[]; loopDelayP99Ms: number; loopDelayMaxMs: number } {
    const samples = this.samples.map((s) => Math.round(s * 1000) / 1000);
    this.samples = [];
    const d = this.delay;
    this.delay = undefined;
    d?.disable();
    return { samples, loopDelayP99Ms: d ? d.percentile(99) / 1e6 : 0, loopDelayMaxMs: d ? d.max / 1e6 : 0 };
  }
}

/**
 * Sends `send(payload)` at a fixed rate: each tick sends the messages due by
 * then (so a late timer never lowers the rate), each stamped when it is sent.
 */
export function pace(rate: number, bytes: number, send: (payload: string) => void): { stop(): number } {
  const started = nowMs();
  let sent = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const due = Math.floor(((nowMs() - started) * rate) / 1000);
    while (sent < due) {
      send(stampedPayload(nowMs(), bytes));
      sent += 1;
    }
    timer = setTimeout(tick, Math.max(0, started + ((sent + 1) * 1000) / rate - nowMs()));
  };
  tick();
  return {
    stop: () => {
      clearTimeout(timer);
      return sent;
    },
  };
}
