import type { Redis } from '@service-relay/core';

/**
 * The Redis tenant connection count's scripts (redis-tenant-connections.ts
 * runs them). One hash per tenant, so every script touches one key (Redis
 * Cluster ready); a field per instance holding `<slots>:<deadline ms>`, its
 * slots being the connections it admitted plus spare ones it took ahead.
 * Only fields whose deadline is still ahead count, so a SIGKILLed instance's
 * slots stop counting one TTL after its last heartbeat; a dead field is
 * deleted by the next acquire that sees it.
 */

/**
 * KEYS: the tenant's hash. ARGV: instance id, slots needed (this instance's
 * connections with the new ones), now ms, own deadline ms, limit, key ttl ms,
 * most spare slots, new connections asking (the last of the needed ones).
 * Admits them in order while the others' slots and this instance's fit the
 * limit; when all fit, takes up to an eighth of the room left as spare slots
 * (at most ARGV[7]): none near the limit or under a small one. Returns
 * {connections admitted, others' slots, this instance's slots as now recorded}.
 */
export const ACQUIRE_SCRIPT = `
local now = tonumber(ARGV[3])
local need = tonumber(ARGV[2])
local limit = tonumber(ARGV[5])
local others = 0
local mine = 0
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local v = entries[i + 1]
  local sep = string.find(v, ':', 1, true)
  if entries[i] == ARGV[1] then
    mine = sep and tonumber(string.sub(v, 1, sep - 1)) or 0
  else
    local deadline = sep and tonumber(string.sub(v, sep + 1)) or 0
    if deadline <= now then
      redis.call('HDEL', KEYS[1], entries[i])
    else
      others = others + (tonumber(string.sub(v, 1, sep - 1)) or 0)
    end
  end
end
local asking = tonumber(ARGV[8])
local admitted = asking
local own = need
if others + need > limit then
  admitted = math.max(0, limit - others - (need - asking))
  if admitted == 0 then return {0, others, mine} end
  own = need - asking + admitted
else
  own = need + math.min(math.floor((limit - others - need) / 8), tonumber(ARGV[7]))
end
-- A proposal below what this instance already recorded was overtaken by a
-- later one (a script retried as EVAL after NOSCRIPT on a fresh node or a
-- promoted replica runs late): it must not lower the count.
if mine > own then own = mine end
redis.call('HSET', KEYS[1], ARGV[1], own .. ':' .. ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {admitted, others, own}
`;

/**
 * KEYS: the tenant's hash. ARGV: instance id, connections held, own deadline
 * ms, key ttl ms, limit, now ms, spare slots to keep. Keeps at most an eighth
 * of the room the others leave (as the acquire takes them). Returns the slots
 * recorded; 0 removes the field.
 */
export const SET_SCRIPT = `
local held = tonumber(ARGV[2])
if held <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
local spare = tonumber(ARGV[7])
if spare > 0 then
  local now = tonumber(ARGV[6])
  local others = 0
  local entries = redis.call('HGETALL', KEYS[1])
  for i = 1, #entries, 2 do
    if entries[i] ~= ARGV[1] then
      local v = entries[i + 1]
      local sep = string.find(v, ':', 1, true)
      local deadline = sep and tonumber(string.sub(v, sep + 1)) or 0
      if deadline > now then others = others + (tonumber(string.sub(v, 1, sep - 1)) or 0) end
    end
  end
  spare = math.max(0, math.min(spare, math.floor((tonumber(ARGV[5]) - others - held) / 8)))
end
redis.call('HSET', KEYS[1], ARGV[1], (held + spare) .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return held + spare
`;

export type TenantConnectionCommands = Redis & {
  relayTenantAcquire(key: string, instance: string, need: number, now: number, deadline: number, limit: number, keyTtlMs: number, maxSpare: number, asking: number): Promise<[number, number, number]>;
  relayTenantSet(key: string, instance: string, held: number, deadline: number, keyTtlMs: number, limit: number, now: number, spare: number): Promise<number>;
};

/** Registers the scripts on a client (EVALSHA, loaded on first use). */
export function defineTenantConnectionCommands(redis: Redis): TenantConnectionCommands {
  redis.defineCommand('relayTenantAcquire', { numberOfKeys: 1, lua: ACQUIRE_SCRIPT });
  redis.defineCommand('relayTenantSet', { numberOfKeys: 1, lua: SET_SCRIPT });
  return redis as TenantConnectionCommands;
}
