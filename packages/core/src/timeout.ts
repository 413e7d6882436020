/**
 * `p`, or a rejection once `ms` have passed without it settling (`p` itself is not cancelled).
 *
 * The deadline is the other side's: an answer that arrived while this process
 * was busy (event-loop lag past `ms`: a GC pause, a CPU-starved machine) is
 * taken, not refused. Node runs expired timers before it reads its sockets, so
 * a plain timer would reject an answer already waiting in the socket buffer;
 * the rejection waits for setImmediate, which runs after that read.
 */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const t = setTimeout(
      () =>
        setImmediate(() => {
          if (!settled) reject(new Error(`timed out after ${ms} ms`));
        }),
      ms,
    );
    p.then(
      (v) => {
        settled = true;
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        settled = true;
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
