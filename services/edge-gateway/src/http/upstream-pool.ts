/** Upstream base URLs taken in turn: one per request or upgrade (REALTIME_URL may list several). */
export interface UpstreamPool {
  next(): string;
  readonly size: number;
  readonly urls: readonly string[];
}

export function roundRobin(urls: readonly string[]): UpstreamPool {
  if (urls.length === 0) throw new Error('roundRobin: at least one upstream URL');
  let i = 0;
  return {
    next: () => {
      const url = urls[i % urls.length]!;
      i = (i + 1) % urls.length;
      return url;
    },
    size: urls.length,
    urls,
  };
}
