import { isCluster, type Logger, type Redis } from '@service-relay/core';
import { newEpoch } from './recovery';

/**
 * Which Redis history every channel epoch belongs to. A Redis that restarted
 * from an RDB snapshot (or an AOF fsynced every second, after a host crash)
 * comes back with its streams and their old epochs but without the last
 * acknowledged messages: unless something changes the epochs, a client
 * resuming with `after` is told `recovered: true` and misses them.
 *
 * The marker hash `<prefix>{history}:generation` names the Redis server
 * process (INFO run_id) that last vouched for the history, and the current
 * generation. On every (re)connect, before any publish or read goes out on
 * the new connection, and every HEARTBEAT_MS, each realtime instance runs one
 * script on it: a marker naming another process means Redis restarted or
 * failed over, and the generation changes unless nothing acknowledged can
 * have been lost (docs/OPERATIONS.md "History durability and Redis
 * persistence"):
 * - a restart: both the previous and the current process ran with
 *   `appendonly yes` + `appendfsync always` (CONFIG GET; if CONFIG is
 *   forbidden, as on managed Redis, loss is assumed);
 * - a failover to a replica (Sentinel: every publish WAITs for it): the new
 *   master's `master_replid2` is the replication id the marker recorded, and
 *   it started at least 2 s before the old master last vouched (a restarted
 *   process starts after that, a promoted replica ran alongside) — unless an
 *   instance acknowledged publishes no replica confirmed on the old master,
 *   which changes the generation, late if another instance went first.
 * The script is atomic, so every instance agrees on the one new generation,
 * and idempotent (the first instance to see the new process decides). Each
 * channel's meta hash records the generation its epoch was vouched under;
 * the publish and read scripts start a new epoch for a channel of an older
 * generation the first time they touch it (redis-scripts.ts): nothing is
 * paid per message but one HGET that replaced an EXISTS.
 *
 * Not on a Redis Cluster (one marker cannot speak for every node): there the
 * generation is '' and epochs change only when streams are lost.
 */
export const GENERATION_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local run, replid, replid2, started, durable, fresh, unrepl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7]
local m = redis.call('HMGET', KEYS[1], 'run', 'gen', 'gen0', 'replid', 'seen', 'durable', 'prev', 'prevkept')
-- Generations count up ('<n>.<random>'), so an instance still on an older one never moves a channel back.
local function nextGen(g)
  return ((tonumber(string.match(g or '', '^(%d+)%.')) or 0) + 1) .. '.' .. fresh
end
if not m[1] or not m[2] then
  local g = nextGen(m[2])
  redis.call('HSET', KEYS[1], 'run', run, 'gen', g, 'gen0', g, 'replid', replid, 'seen', now, 'durable', durable)
  return {g, g, 'new'}
end
local gen0 = m[3] or ''
if m[1] == run then
  local verdict = 'same'
  redis.call('HSET', KEYS[1], 'seen', now, 'replid', replid)
  if durable == '0' then redis.call('HSET', KEYS[1], 'durable', '0') end
  if unrepl ~= '' and unrepl == m[7] and m[8] == '1' then
    local g = nextGen(m[2])
    redis.call('HSET', KEYS[1], 'gen', g, 'prevkept', '0')
    return {g, gen0, 'changed-late'}
  end
  return {m[2], gen0, verdict}
end
local promoted = replid2 == m[4] and started < (tonumber(m[5]) or 0) - 2000
local kept
if promoted then kept = unrepl ~= m[1] else kept = durable == '1' and m[6] == '1' end
local gen = m[2]
if not kept then gen = nextGen(m[2]) end
redis.call('HSET', KEYS[1], 'run', run, 'gen', gen, 'replid', replid, 'seen', now, 'durable', durable, 'prev', m[1], 'prevkept', kept and '1' or '0')
if kept then return {gen, gen0, promoted and 'kept-failover' or 'kept-durable'} end
return {gen, gen0, promoted and 'changed-failover' or 'changed-restart'}
`;

export interface Generation {
  /** The current generation ('' on a Cluster: not tracked). */
  gen: string;
  /** Whether a channel meta hash without a generation (written before generations) belongs to `gen`. */
  adopt: boolean;
}

type GenerationReply = [gen: string, gen0: string, verdict: string];

interface GenerationScript {
  relayGeneration(key: string, ...args: string[]): Promise<GenerationReply>;
}

const HEARTBEAT_MS = 5000;
const UNTRACKED: Generation = Object.freeze({ gen: '', adopt: true });

export class HistoryGeneration {
  private current: Generation | undefined;
  private checking: Promise<Generation> | undefined;
  /** Bumped on every lost connection: a check that spans one is void. */
  private connection = 0;
  /** The server process this instance last checked. */
  private run = '';
  /** A server process on which this instance acknowledged a publish that no replica confirmed. */
  private unreplicatedRun = '';
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly cmd: Redis & GenerationScript;

  constructor(
    cmd: Redis,
    private readonly key: string,
    private readonly logger: Logger,
  ) {
    this.cmd = cmd as Redis & GenerationScript;
    if (isCluster(cmd)) {
      this.current = UNTRACKED;
      return;
    }
    this.cmd.defineCommand('relayGeneration', { numberOfKeys: 1, lua: GENERATION_SCRIPT });
    cmd.on('close', () => {
      this.connection++;
      this.current = undefined;
    });
    this.timer = setInterval(() => {
      if (cmd.status === 'ready') this.check().catch(() => {});
    }, HEARTBEAT_MS);
    this.timer.unref();
  }

  /** The generation vouched for on the current connection: checked first after every (re)connect. */
  async get(): Promise<Generation> {
    if (this.current) return this.current;
    this.checking ??= this.check().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  /** A publish was acknowledged without a replica's confirmation: a failover from this server may lose it. */
  unreplicated(): void {
    this.unreplicatedRun = this.run;
  }

  /**
   * A replica acknowledged a publish on this server (WAIT): it holds the
   * master's replication offset as of that write, so every earlier
   * unconfirmed publish on the same server process (on any connection) is on
   * it too, and a failover to it can no longer lose them. Without this, a
   * replica that rejoined and resynced after a first failover would still
   * count as missing the writes made while it was away, and a second
   * failover would start new epochs for nothing.
   */
  replicated(): void {
    if (this.unreplicatedRun !== '' && this.unreplicatedRun === this.run) this.unreplicatedRun = '';
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async check(): Promise<Generation> {
    const connection = this.connection;
    const info = parseInfo(String(await this.cmd.call('INFO', 'server', 'replication')));
    const durable = await this.durable();
    const run = info.get('run_id') ?? '';
    const startedMs = Math.floor(Number(info.get('server_time_usec')) / 1000) - Number(info.get('uptime_in_seconds')) * 1000;
    const [gen, gen0, verdict] = await this.cmd.relayGeneration(
      this.key, run, info.get('master_replid') ?? '', info.get('master_replid2') ?? '', String(startedMs), durable ? '1' : '0', newEpoch(), this.unreplicatedRun,
    );
    if (connection !== this.connection) throw new Error('redis connection lost while checking the history generation');
    if (verdict.startsWith('changed')) {
      this.logger.warn({ verdict }, 'Redis restarted or failed over and may have lost acknowledged messages: every channel starts a new epoch (clients resuming are told history_lost)');
    } else if (verdict.startsWith('kept') && run !== this.run) {
      this.logger.info({ verdict }, 'Redis restarted or failed over without losing acknowledged messages: channel epochs kept');
    }
    this.run = run;
    this.current = { gen, adopt: gen === gen0 };
    return this.current;
  }

  /** `appendonly yes` + `appendfsync always`, if CONFIG may be read; otherwise loss is assumed. */
  private async durable(): Promise<boolean> {
    try {
      const flat = (await this.cmd.call('CONFIG', 'GET', 'appendonly', 'appendfsync')) as string[];
      const cfg = new Map<string, string>();
      for (let i = 0; i + 1 < flat.length; i += 2) cfg.set(flat[i]!, flat[i + 1]!);
      return cfg.get('appendonly') === 'yes' && cfg.get('appendfsync') === 'always';
    } catch {
      return false;
    }
  }
}

function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0) fields.set(line.slice(0, i), line.slice(i + 1));
  }
  return fields;
}
