import { createRedis, redisPing, redisReady, waitForReplica, type Logger, type Redis, type RedisTarget } from '@service-relay/core';
import type { TenantKeysData } from '../token/tenant-keys';
import type { KeyCipher } from './key-cipher';
import type { SharedKeyCache, SharedKeyEntry } from './shared-key-cache';

// KEYS: generation, entry, floor. An entry counts only in the current
// generation (dropAll bumps it, orphaning every entry at once without a scan)
// and at or above the tenant's floor.
const GET = `
local gen = redis.call('GET', KEYS[1]) or '0'
local h = redis.call('HMGET', KEYS[2], 'g', 'v', 'c')
if not h[1] or h[1] ~= gen then return nil end
if tonumber(h[2]) < tonumber(redis.call('GET', KEYS[3]) or '0') then return nil end
return {h[2], h[3], redis.call('PTTL', KEYS[2])}`;

// ARGV: version, sealed entry, ttl ms. Refuses versions below the floor or
// below a live entry of the current generation.
const PUT = `
local gen = redis.call('GET', KEYS[1]) or '0'
local v = tonumber(ARGV[1])
if v < tonumber(redis.call('GET', KEYS[3]) or '0') then return 0 end
local cur = redis.call('HMGET', KEYS[2], 'g', 'v')
if cur[1] == gen and cur[2] and tonumber(cur[2]) > v then return 0 end
redis.call('HSET', KEYS[2], 'g', gen, 'v', ARGV[1], 'c', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1`;

// ARGV: version, floor ttl ms.
const DROP = `
redis.call('DEL', KEYS[2])
local floor = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[1]) > floor then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2]) else redis.call('PEXPIRE', KEYS[3], ARGV[2]) end
return 1`;

interface ScriptedRedis extends Redis {
  verifierKeysGet(gen: string, entry: string, floor: string): Promise<[string, string, number] | null>;
  verifierKeysPut(gen: string, entry: string, floor: string, version: number, sealed: string, ttlMs: number): Promise<number>;
  verifierKeysDrop(gen: string, entry: string, floor: string, version: number, floorTtlMs: number): Promise<number>;
}

export interface RedisKeyCacheOptions {
  url: RedisTarget;
  prefix: string;
  cipher: KeyCipher;
  /** How long a raised floor is kept: far longer than any fetch or entry can live. */
  floorTtlMs: number;
  logger: Logger;
}

/** The shared key cache in Redis; entries are sealed, never plaintext at rest. */
export class RedisKeyCache implements SharedKeyCache {
  private readonly redis: ScriptedRedis;
  private readonly genKey: string;
  /**
   * A dropAll() that could not reach Redis: until the generation bump lands,
   * nothing is read from or written to Redis.
   */
  private pendingDropAll = false;

  constructor(private readonly opts: RedisKeyCacheOptions) {
    this.redis = createRedis(opts.url, { connectionName: 'verifier-key-cache' }) as ScriptedRedis;
    this.redis.on('error', (err: Error) => opts.logger.debug({ err: err.message }, 'key cache redis error'));
    this.redis.defineCommand('verifierKeysGet', { numberOfKeys: 3, lua: GET });
    this.redis.defineCommand('verifierKeysPut', { numberOfKeys: 3, lua: PUT });
    this.redis.defineCommand('verifierKeysDrop', { numberOfKeys: 3, lua: DROP });
    // One hash tag for every key of the cache: each script reads the global generation with a tenant's keys, so on a Cluster they share a slot.
    this.genKey = `${opts.prefix}{verifier}:keys:gen`;
  }

  /** Waits for the first connection; until then every call is a miss. */
  async start(): Promise<void> {
    await redisReady(this.redis, 5000);
  }

  async get(tenantId: string): Promise<SharedKeyEntry | undefined> {
    if (!(await this.settled())) return undefined;
    const row = await this.redis.verifierKeysGet(this.genKey, this.entryKey(tenantId), this.floorKey(tenantId));
    if (!row) return undefined;
    const [version, sealed, pttl] = row;
    const data = this.opts.cipher.open(tenantId, Number(version), sealed);
    if (!data) {
      // During a SECRETS_KEYS rotation verifiers seal with different keys for a while: a miss, not a fault.
      if (this.opts.cipher.otherKey(sealed)) this.opts.logger.debug({ tenant_id: tenantId }, 'key cache entry sealed under a key this verifier does not have; fetching');
      else this.opts.logger.warn({ tenant_id: tenantId }, 'key cache entry failed to open (tampered, or another SECRETS_KEY); ignoring it');
      return undefined;
    }
    return { data, ttlMs: pttl > 0 ? pttl : 0 };
  }

  async put(tenantId: string, data: TenantKeysData, ttlMs: number): Promise<void> {
    if (!(await this.settled())) return;
    const sealed = this.opts.cipher.seal(tenantId, data);
    await this.redis.verifierKeysPut(this.genKey, this.entryKey(tenantId), this.floorKey(tenantId), data.version, sealed, ttlMs);
  }

  async drop(tenantId: string, version: number): Promise<void> {
    await this.redis.verifierKeysDrop(this.genKey, this.entryKey(tenantId), this.floorKey(tenantId), version, this.opts.floorTtlMs);
    // Under Sentinel: the raised floor must reach the replica, or a failover could bring the old entry back.
    await waitForReplica(this.redis);
  }

  async dropAll(): Promise<void> {
    this.pendingDropAll = true;
    await this.settled();
  }

  async ready(): Promise<boolean> {
    return redisPing(this.redis);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }

  private async settled(): Promise<boolean> {
    if (!this.pendingDropAll) return true;
    try {
      await this.redis.incr(this.genKey);
      await waitForReplica(this.redis);
      this.pendingDropAll = false;
      return true;
    } catch {
      return false;
    }
  }

  private entryKey(tenantId: string): string {
    return `${this.opts.prefix}{verifier}:keys:${tenantId}`;
  }

  private floorKey(tenantId: string): string {
    return `${this.opts.prefix}{verifier}:floor:${tenantId}`;
  }
}
