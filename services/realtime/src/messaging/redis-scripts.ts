/**
 * The Redis driver's Lua scripts. Keys of one channel share the stream's
 * name as their stem (`…ch:{<tenant>:<channel>}`, `…/meta`, `…/idem/<key>`;
 * '/' occurs in no channel name or key), so they live and expire together
 * and, by the hash tag, share one Redis Cluster slot. The live message goes
 * out by PUBLISH on `…msg:<tenant>:<channel>` (on a Cluster, copied to every
 * node over the cluster bus), by SPUBLISH on `…msg:{<tenant>:<channel>}` (the
 * stream's hash tag, so the stream's slot: Redis 7 lets a script SPUBLISH
 * there, and only the master serving it delivers), or both (redis-live.ts).
 */

/**
 * Generations are '<n>.<random>' (redis-history-generation.ts): a channel
 * already vouched under a later one than the caller's (an instance that has
 * not yet seen the change) keeps its epoch.
 */
const NEWER = `
local function newer(g, gen)
  if not g then return false end
  return (tonumber(string.match(g, '^(%d+)%.')) or 0) > (tonumber(string.match(gen, '^(%d+)%.')) or 0)
end`;

/**
 * One atomic step per publish: the idempotency key is checked, the id
 * assigned, the entry trimmed, the channel's idle clock reset and the message
 * published, with no other publish in between. So pub/sub delivery order
 * equals id order everywhere, and a retry with a known key stores nothing.
 *
 * KEYS: stream, meta, [idempotency key]
 * ARGV: maxlen, user id, data JSON, ttl s, plain live channel ('' for none),
 * new epoch, window ms, generation, adopt ('1': a meta hash without a
 * generation belongs to it), sharded live channel ('' or absent for none)
 * Returns {id, 0} for a new message, {id, 1, fields?} for a known key.
 * A stream whose epoch was vouched under an older generation (Redis restarted
 * or failed over and may have lost acknowledged messages since:
 * redis-history-generation.ts) starts a new epoch at this message.
 */
export const PUBLISH_SCRIPT = `${NEWER}
if KEYS[3] then
  local prev = redis.call('GET', KEYS[3])
  if prev then
    local e = redis.call('XRANGE', KEYS[1], prev, prev)
    if e[1] then return {prev, 1, e[1][2]} end
    return {prev, 1}
  end
end
local fresh = redis.call('EXISTS', KEYS[1]) == 0
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'u', ARGV[2], 'd', ARGV[3])
local gen = ARGV[8]
if fresh then
  -- A new stream (first publish, idle expiry, or lost with the store): a new epoch begins here.
  redis.call('HSET', KEYS[2], 'e', ARGV[6], 's', id, 'g', gen)
else
  local g = redis.call('HGET', KEYS[2], 'g')
  if g ~= gen and not newer(g, gen) then
    if redis.call('EXISTS', KEYS[2]) == 0 then
      -- A stream from before epochs: where it began is unknown.
      redis.call('HSET', KEYS[2], 'e', ARGV[6], 's', '0-0', 'g', gen)
    elseif gen == '' or (not g and ARGV[9] == '1') then
      -- Generations not tracked (Cluster), or a meta hash from before them that nothing since put in doubt.
      redis.call('HSET', KEYS[2], 'g', gen)
    else
      -- Redis may have lost acknowledged messages of this stream: a new epoch begins here.
      redis.call('HSET', KEYS[2], 'e', ARGV[6], 's', id, 'g', gen)
    end
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
if KEYS[3] then redis.call('SET', KEYS[3], id, 'NX', 'PX', ARGV[7]) end
local live = id .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[3]
if ARGV[5] ~= '' then redis.call('PUBLISH', ARGV[5], live) end
if ARGV[10] and ARGV[10] ~= '' then redis.call('SPUBLISH', ARGV[10], live) end
return {id, 0}
`;

/**
 * A history read with what recovery needs, in one consistent step. XINFO
 * runs only when a position is given (recovery), never on publish.
 *
 * KEYS: stream, meta
 * ARGV: after ('' for the latest), limit (0: the epoch only), generation,
 * adopt, new epoch (as for PUBLISH_SCRIPT: a stream vouched under an older
 * generation starts a new epoch here, just after its last retained entry and
 * not before Redis's clock now, so every position a client got before the
 * restart or failover lies before it)
 * Returns {0, time s, time µs} without a stream, else {1, time s, time µs,
 * epoch|nil, since|nil, max-deleted-entry-id, first retained id|nil, entries}.
 * Trimming does not move max-deleted-entry-id (only XDEL does): when fewer
 * entries remain than were ever added, the first retained entry marks where
 * trimming stopped.
 */
export const READ_SCRIPT = `${NEWER}
local now = redis.call('TIME')
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, now[1], now[2]} end
local meta = redis.call('HMGET', KEYS[2], 'e', 's', 'g')
local gen = ARGV[3]
if meta[1] and meta[3] ~= gen and not newer(meta[3], gen) then
  if gen == '' or (not meta[3] and ARGV[4] == '1') then
    redis.call('HSET', KEYS[2], 'g', gen)
  else
    local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    local since = string.format('%d-0', ms)
    local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
    if last then
      local dash = string.find(last[1], '-', 1, true)
      local lms = tonumber(string.sub(last[1], 1, dash - 1))
      if lms >= ms then since = string.format('%d-%d', lms, tonumber(string.sub(last[1], dash + 1)) + 1) end
    end
    redis.call('HSET', KEYS[2], 'e', ARGV[5], 's', since, 'g', gen)
    meta[1] = ARGV[5]
    meta[2] = since
  end
end
local limit = tonumber(ARGV[2])
local entries = {}
local maxDeleted = '0-0'
local trimmedTo = false
if ARGV[1] == '' then
  if limit > 0 then entries = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', limit) end
else
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local f = {}
  for i = 1, #info, 2 do f[info[i]] = info[i + 1] end
  maxDeleted = f['max-deleted-entry-id']
  if f['entries-added'] > f['length'] then trimmedTo = f['recorded-first-entry-id'] end
  if limit > 0 then entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', limit) end
end
return {1, now[1], now[2], meta[1], meta[2], maxDeleted, trimmedTo, entries}
`;
