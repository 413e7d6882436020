import type { Redis } from '@service-relay/core';

/*
 * The feed mirror's keys (one hash tag, so they live on one Cluster slot):
 * - log  (ZSET): score = sequence, member = the change as JSON;
 * - meta (HASH): base (the mirror holds every change after it up to contig),
 *   contig, latest (the highest sequence it holds), degraded_until (Redis ms
 *   until which some consumer may hold a lease granted from the mirror).
 * Time is Redis's own (TIME), so every registry replica reads one clock.
 */

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/** Moves contig forward over the sequences now present (never below base). */
const ADVANCE = `local contig = math.max(tonumber(redis.call('HGET', KEYS[2], 'contig')), base)
while #redis.call('ZRANGEBYSCORE', KEYS[1], contig + 1, contig + 1, 'LIMIT', 0, 1) > 0 do
  contig = contig + 1
end
redis.call('HSET', KEYS[2], 'contig', contig)`;

/**
 * KEYS: log, meta. ARGV: keep, then seq, json pairs.
 * Adds changes (a sequence already held is kept as it is), trims to `keep`
 * (raising base past what it dropped). Returns {initialized, degraded_until, now}.
 */
const APPEND_SCRIPT = `${NOW}
local base = tonumber(redis.call('HGET', KEYS[2], 'base'))
local du = tonumber(redis.call('HGET', KEYS[2], 'degraded_until') or '0')
if not base then return {0, du, now} end
local latest = tonumber(redis.call('HGET', KEYS[2], 'latest'))
for i = 2, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq > base and #redis.call('ZRANGEBYSCORE', KEYS[1], seq, seq, 'LIMIT', 0, 1) == 0 then
    redis.call('ZADD', KEYS[1], seq, ARGV[i + 1])
    if seq > latest then latest = seq end
  end
end
redis.call('HSET', KEYS[2], 'latest', latest)
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])
if over > 0 then
  local dropped = redis.call('ZRANGE', KEYS[1], over - 1, over - 1, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
  local through = tonumber(dropped[2])
  if through > base then
    base = through
    redis.call('HSET', KEYS[2], 'base', base)
  end
end
${ADVANCE}
return {1, du, now}`;

/** KEYS: log, meta. Returns {base, contig, latest} (nil when the mirror is empty). */
const META_SCRIPT = `return redis.call('HMGET', KEYS[2], 'base', 'contig', 'latest')`;

/**
 * KEYS: log, meta. ARGV: base, force. Starts an empty mirror at `base` (the
 * latest sequence read from PostgreSQL); with force = 1 starts it over even
 * if it holds something (PostgreSQL is behind it: it lost commits, or it is
 * another database). degraded_until survives: leases granted stay counted.
 */
const INIT_SCRIPT = `if redis.call('HGET', KEYS[2], 'base') and ARGV[2] ~= '1' then return 0 end
local du = redis.call('HGET', KEYS[2], 'degraded_until')
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[2], 'base', ARGV[1], 'contig', ARGV[1], 'latest', ARGV[1])
if du then redis.call('HSET', KEYS[2], 'degraded_until', du) end
return 1`;

/**
 * KEYS: log, meta. ARGV: applied, limit, lease_ms.
 * What a consumer gets from the mirror: {status, latest, granted, json...}
 * with status 'none' (no mirror), 'reset' (it needs changes the mirror no
 * longer holds, or is ahead of it) or 'ok'. A consumer that has applied
 * everything the mirror holds is granted its lease: degraded_until is raised
 * to cover it, so a change appended later waits it out before its 200.
 */
const READ_SCRIPT = `${NOW}
local m = redis.call('HMGET', KEYS[2], 'base', 'contig', 'latest', 'degraded_until')
if not m[1] then return {'none', -1, 0} end
local base, contig, latest = tonumber(m[1]), tonumber(m[2]), tonumber(m[3])
local applied = tonumber(ARGV[1])
if applied < 0 then return {'ok', latest, 0} end
if applied < base or applied > latest then return {'reset', latest, 0} end
if applied >= latest then
  local until_ms = now + tonumber(ARGV[3])
  if until_ms > tonumber(m[4] or '0') then redis.call('HSET', KEYS[2], 'degraded_until', until_ms) end
  return {'ok', latest, 1}
end
local out = {'ok', latest, 0}
if contig > applied then
  local rows = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. applied, contig, 'LIMIT', 0, tonumber(ARGV[2]))
  for _, r in ipairs(rows) do out[#out + 1] = r end
end
return out`;

export type FeedMirrorCommands = Redis & {
  relayFeedAppend(log: string, meta: string, keep: number, ...pairs: Array<string | number>): Promise<[number, number, number]>;
  relayFeedMeta(log: string, meta: string): Promise<[string | null, string | null, string | null]>;
  relayFeedInit(log: string, meta: string, base: number, force: number): Promise<number>;
  relayFeedRead(log: string, meta: string, applied: number, limit: number, leaseMs: number): Promise<Array<string | number>>;
};

/** Registers the scripts on a client (EVALSHA, loaded on first use). */
export function defineFeedMirrorCommands(redis: Redis): FeedMirrorCommands {
  redis.defineCommand('relayFeedAppend', { numberOfKeys: 2, lua: APPEND_SCRIPT });
  redis.defineCommand('relayFeedMeta', { numberOfKeys: 2, lua: META_SCRIPT });
  redis.defineCommand('relayFeedInit', { numberOfKeys: 2, lua: INIT_SCRIPT });
  redis.defineCommand('relayFeedRead', { numberOfKeys: 2, lua: READ_SCRIPT });
  return redis as FeedMirrorCommands;
}
