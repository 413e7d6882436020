/** Something holding frames for the end of this tick (a connection). */
export interface TickFlushable {
  flushTick(): void;
}

const pending: TickFlushable[] = [];
let scheduled = false;

/**
 * Flushes every connection that held frames this tick, on one
 * `process.nextTick` for the whole process. One tick callback per connection
 * and message (a closure and a tick object each) was 200,000 allocations a
 * second at 200 messages/s to 1,000 subscribers, and the scavenges they
 * cost showed in the delivery latency's tail (bench/README.md "Latency under load").
 */
export function flushAtEndOfTick(c: TickFlushable): void {
  pending.push(c);
  if (scheduled) return;
  scheduled = true;
  process.nextTick(flushAll);
}

function flushAll(): void {
  let i = 0;
  try {
    // By index: a flush may hold frames on another connection (a close
    // sending what it owed), which then joins this pass.
    for (; i < pending.length; i++) pending[i]!.flushTick();
  } finally {
    if (i < pending.length) {
      // The one at i threw (and the error goes on as it would have from its
      // own tick callback): the others still flush, on the next tick.
      pending.splice(0, i + 1);
      process.nextTick(flushAll);
    } else {
      pending.length = 0;
      scheduled = false;
    }
  }
}
