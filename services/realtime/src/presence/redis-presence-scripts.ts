import type { Redis } from '@service-relay/core';

/**
 * The Redis presence driver's scripts. A channel's keys share the hash tag
 * `{tenant:channel}`, so every script touches one slot (Redis Cluster ready):
 * `…:users` (user → connection count), `…:data` (user → member data JSON of
 * the latest join), `…:i:<instance>` (connection → user, per instance).
 * Events are PUBLISHed in the same script as the change, so every instance
 * sees joins and leaves in the order the store applied them:
 * `j\n<user>\n<1 + data | 0>` and `l\n<user>`.
 */

/** KEYS: instance hash, users, data. ARGV: connection, user, has data (1|0), data, event channel. Returns the user's count (0: already a member). */
export const JOIN_SCRIPT = `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
local n = redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
if ARGV[3] == '1' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[4]) else redis.call('HDEL', KEYS[3], ARGV[2]) end
if n == 1 then redis.call('PUBLISH', ARGV[5], 'j\\n' .. ARGV[2] .. '\\n' .. ARGV[3] .. ARGV[4]) end
return n
`;

/** KEYS: instance hash, users, data. ARGV: connection, event channel. Returns 1 when the connection was a member. */
export const LEAVE_SCRIPT = `
local user = redis.call('HGET', KEYS[1], ARGV[1])
if not user then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HINCRBY', KEYS[2], user, -1) <= 0 then
  redis.call('HDEL', KEYS[2], user)
  redis.call('HDEL', KEYS[3], user)
  redis.call('PUBLISH', ARGV[2], 'l\\n' .. user)
end
return 1
`;

/** Every membership of one instance on one channel (a clean stop, or a dead instance swept). KEYS: instance hash, users, data. ARGV: event channel. Returns the users that left. */
export const REMOVE_INSTANCE_SCRIPT = `
local conns = redis.call('HGETALL', KEYS[1])
local gone = 0
for i = 2, #conns, 2 do
  local user = conns[i]
  if redis.call('HINCRBY', KEYS[2], user, -1) <= 0 then
    redis.call('HDEL', KEYS[2], user)
    redis.call('HDEL', KEYS[3], user)
    redis.call('PUBLISH', ARGV[1], 'l\\n' .. user)
    gone = gone + 1
  end
end
redis.call('DEL', KEYS[1])
return gone
`;

/** KEYS: users, data. Returns {users hash, data hash} read at one moment. */
export const MEMBERS_SCRIPT = `
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
`;

/**
 * The heartbeat. KEYS: the instances sorted set. ARGV: instance, now ms,
 * first (1|0). Returns 0 when the instance is no longer listed (a sweeper
 * took it for dead): it then starts over under a new id instead of coming
 * back under one that is being swept.
 */
export const BEAT_SCRIPT = `
if ARGV[3] ~= '1' and not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
`;

/**
 * Claims a dead instance for sweeping; exactly one caller wins. KEYS: the
 * instances set, the sweeping set. ARGV: instance, cutoff ms (a beat at or
 * before it is too old), now ms. A claim that was not finished (its sweeper
 * died too) can be claimed again once it is as old as a missed beat.
 */
export const CLAIM_SCRIPT = `
local cutoff = tonumber(ARGV[2])
local beat = redis.call('ZSCORE', KEYS[1], ARGV[1])
if beat and tonumber(beat) <= cutoff then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  return 1
end
local claimed = redis.call('ZSCORE', KEYS[2], ARGV[1])
if claimed and tonumber(claimed) <= cutoff then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  return 1
end
return 0
`;

export type PresenceCommands = Redis & {
  relayPresenceJoin(iHash: string, users: string, data: string, conn: string, user: string, hasData: string, dataJson: string, events: string): Promise<number>;
  relayPresenceLeave(iHash: string, users: string, data: string, conn: string, events: string): Promise<number>;
  relayPresenceRemove(iHash: string, users: string, data: string, events: string): Promise<number>;
  relayPresenceMembers(users: string, data: string): Promise<[string[], string[]]>;
  relayPresenceBeat(instances: string, instance: string, now: number, first: string): Promise<number>;
  relayPresenceClaim(instances: string, sweeping: string, instance: string, cutoff: number, now: number): Promise<number>;
};

/** Registers the scripts on a client (EVALSHA, loaded on first use). */
export function definePresenceCommands(redis: Redis): PresenceCommands {
  redis.defineCommand('relayPresenceJoin', { numberOfKeys: 3, lua: JOIN_SCRIPT });
  redis.defineCommand('relayPresenceLeave', { numberOfKeys: 3, lua: LEAVE_SCRIPT });
  redis.defineCommand('relayPresenceRemove', { numberOfKeys: 3, lua: REMOVE_INSTANCE_SCRIPT });
  redis.defineCommand('relayPresenceMembers', { numberOfKeys: 2, lua: MEMBERS_SCRIPT });
  redis.defineCommand('relayPresenceBeat', { numberOfKeys: 1, lua: BEAT_SCRIPT });
  redis.defineCommand('relayPresenceClaim', { numberOfKeys: 2, lua: CLAIM_SCRIPT });
  return redis as PresenceCommands;
}
