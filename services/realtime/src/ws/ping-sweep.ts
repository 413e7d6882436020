/** Something that can be pinged (a live connection). */
export interface Pingable {
  ping(): void;
}

/** Connections pinged per turn of the event loop. */
export const PING_SLICE = 500;

/**
 * Pings every connection once per interval, PING_SLICE at a time with the
 * event loop free in between. Each ping is a socket write (a syscall, ~25 µs on
 * loopback): one loop over 19,000 connections held the event loop ~400 ms and
 * delayed every delivery behind it (the bench's scale scenario, embedded default).
 * Returns a function that stops the sweeps, also one in progress.
 */
export function startPingSweep(connections: Iterable<Pingable>, intervalMs: number): () => void {
  let stopped = false;
  let sweeping = false;
  let pending: NodeJS.Immediate | undefined;
  const sweep = () => {
    // A sweep still running when the next is due (it cannot take an interval in practice) is not doubled.
    if (sweeping) return;
    sweeping = true;
    const all = [...connections];
    let at = 0;
    const slice = () => {
      pending = undefined;
      if (stopped) return;
      const end = Math.min(at + PING_SLICE, all.length);
      for (; at < end; at++) all[at]!.ping();
      if (at < all.length) pending = setImmediate(slice);
      else sweeping = false;
    };
    slice();
  };
  const timer = setInterval(sweep, intervalMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
    if (pending) clearImmediate(pending);
  };
}
