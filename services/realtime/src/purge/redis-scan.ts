import { isCluster, type Redis } from '@service-relay/core';

/** Keys asked for per SCAN call. */
const SCAN_COUNT = 1000;
/** SCAN calls per node at most (a keyspace of a billion keys at SCAN_COUNT each): the loop is bounded. */
const MAX_SCAN_ROUNDS = 1_000_000;

/** `s` matched literally inside a Redis glob pattern (`{`, `}` and `:` are not special; `*?[]\` are). */
export function globLiteral(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * Deletes (UNLINK: freed off the main thread) every key matching `pattern`,
 * walking the keyspace with SCAN on every master (a Cluster) or the one
 * server. Costs one round trip per SCAN_COUNT keys of the whole keyspace,
 * matching or not, plus one pipeline per batch found. Returns the keys
 * deleted. Keys written after the walk passed their place are not seen.
 */
export async function unlinkMatching(redis: Redis, pattern: string): Promise<number> {
  const nodes: Redis[] = isCluster(redis) ? (redis as unknown as { nodes(role: string): Redis[] }).nodes('master') : [redis];
  let deleted = 0;
  for (const node of nodes) {
    let cursor = '0';
    for (let round = 0; round < MAX_SCAN_ROUNDS; round++) {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
      if (keys.length > 0) {
        // One UNLINK per key: keys of several hash slots in one command would be CROSSSLOT on a Cluster.
        const pipeline = node.pipeline();
        for (const k of keys) pipeline.unlink(k);
        for (const [err, n] of (await pipeline.exec()) ?? []) {
          if (err) throw err;
          deleted += Number(n);
        }
      }
      cursor = next;
      if (cursor === '0') break;
    }
  }
  return deleted;
}
