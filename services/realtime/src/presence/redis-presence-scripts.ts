import type { Redis } from '@service-relay/core';

/**
 * The Redis presence driver's scripts. A channel's keys share the hash tag
 * `{tenant:channel}`, so every script touches one slot (Redis Cluster ready):
 * `…:users` (user → connection count), `…:data` (user → member data JSON of
 * the latest join), `…:i:<instance>` (connection → user, per instance).
 * Events are PUBLISHed in the same script as the change, so every instance
 * sees joins and leaves in the order the store applied them:
 * `j\n<user>\n<1 + data | 0>` and `l\n<user>`.
 *
 * Webhook events (#32): when the caller passes an event stream (EMIT's six
 * ARGV, '' for none), a join that makes a user's first connection and a
 * leave that ends its last also `XADD` the event to that stream in the same
 * script, so two instances racing produce exactly one event, in the store's
 * order (docs/ARCHITECTURE.md "Webhooks"). The stream is not in KEYS (it is
 * in another slot): on Redis Cluster realtime passes none.
 */

/** EMIT ARGV (from `base`): stream ('' none), event type, tenant, channel ('' omitted), with user (1|0), now ms. */
const EMIT = `
local function emit(base, user, data)
  local stream = ARGV[base]
  if stream == nil or stream == '' then return end
  local f = {'t', ARGV[base + 1], 'te', ARGV[base + 2], 'ms', ARGV[base + 5]}
  if ARGV[base + 3] ~= '' then f[#f + 1] = 'c'; f[#f + 1] = ARGV[base + 3] end
  if ARGV[base + 4] == '1' then f[#f + 1] = 'u'; f[#f + 1] = user end
  if data ~= nil and data ~= '' then f[#f + 1] = 'd'; f[#f + 1] = data end
  redis.call('XADD', stream, '*', unpack(f))
end
`;

/** KEYS: instance hash, users, data. ARGV: connection, user, has data (1|0), data, event channel, EMIT. Returns the user's count (0: already a member). */
export const JOIN_SCRIPT = `${EMIT}
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
local n = redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
if ARGV[3] == '1' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[4]) else redis.call('HDEL', KEYS[3], ARGV[2]) end
if n == 1 then
  redis.call('PUBLISH', ARGV[5], 'j\\n' .. ARGV[2] .. '\\n' .. ARGV[3] .. ARGV[4])
  if ARGV[3] == '1' then emit(6, ARGV[2], ARGV[4]) else emit(6, ARGV[2], nil) end
end
return n
`;

/** KEYS: instance hash, users, data. ARGV: connection, event channel, EMIT. Returns 1 when the connection was a member. */
export const LEAVE_SCRIPT = `${EMIT}
local user = redis.call('HGET', KEYS[1], ARGV[1])
if not user then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HINCRBY', KEYS[2], user, -1) <= 0 then
  redis.call('HDEL', KEYS[2], user)
  redis.call('HDEL', KEYS[3], user)
  redis.call('PUBLISH', ARGV[2], 'l\\n' .. user)
  emit(3, user, nil)
end
return 1
`;

/** Every membership of one instance on one channel (a clean stop, or a dead instance swept). KEYS: instance hash, users, data. ARGV: event channel, EMIT. Returns the users that left. */
export const REMOVE_INSTANCE_SCRIPT = `${EMIT}
local conns = redis.call('HGETALL', KEYS[1])
local gone = 0
for i = 2, #conns, 2 do
  local user = conns[i]
  if redis.call('HINCRBY', KEYS[2], user, -1) <= 0 then
    redis.call('HDEL', KEYS[2], user)
    redis.call('HDEL', KEYS[3], user)
    redis.call('PUBLISH', ARGV[1], 'l\\n' .. user)
    emit(2, user, nil)
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

/** The scripts' EMIT arguments: stream ('' none), event type, tenant, channel ('' omitted), with user (1|0), now ms. */
export type EmitArgs = [] | [stream: string, type: string, tenant: string, channel: string, withUser: string, nowMs: number];

export type PresenceCommands = Redis & {
  relayPresenceJoin(iHash: string, users: string, data: string, conn: string, user: string, hasData: string, dataJson: string, events: string, ...emit: EmitArgs): Promise<number>;
  relayPresenceLeave(iHash: string, users: string, data: string, conn: string, events: string, ...emit: EmitArgs): Promise<number>;
  relayPresenceRemove(iHash: string, users: string, data: string, events: string, ...emit: EmitArgs): Promise<number>;
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
