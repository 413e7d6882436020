import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

export type { Redis } from 'ioredis';

/** The forms REDIS_URL accepts (docs/OPERATIONS.md "Redis high availability"). */
export const REDIS_URL_FORMS =
  'redis[s]://[user:password@]host:port[/db] (one server), ' +
  'redis[s]-sentinel://[user:password@]host:port[,host:port…]/<master name>[/db] (Sentinel), ' +
  'redis[s]-cluster://[user:password@]host:port[,host:port…] (Cluster)';

interface HostPort {
  host: string;
  port: number;
}

export type RedisTopology =
  | { kind: 'single'; url: string }
  | { kind: 'sentinel'; sentinels: HostPort[]; name: string; db: number; tls: boolean; username?: string; password?: string }
  | { kind: 'cluster'; nodes: HostPort[]; tls: boolean; username?: string; password?: string };

export class RedisUrlError extends Error {
  constructor(reason: string) {
    super(`${reason}; accepted forms: ${REDIS_URL_FORMS}`);
    this.name = 'RedisUrlError';
  }
}

/**
 * Reads one of the three URL forms. Sentinel and Cluster URLs list several
 * host:port pairs, which WHATWG URL cannot parse, so they are split here.
 * The password (if any) is the data nodes' one; sentinels are assumed to
 * share it (ioredis's sentinelPassword), which is the common setup.
 */
export function parseRedisUrl(url: string): RedisTopology {
  const m = /^(rediss?)(-sentinel|-cluster)?:\/\/(?:([^@/]*)@)?([^/?#]+)(\/[^?#]*)?$/.exec(url);
  if (!m) throw new RedisUrlError('is not a Redis URL');
  const [, scheme, mode, auth, hostList, path] = m;
  const tls = scheme === 'rediss';
  if (!mode) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new RedisUrlError('is not a valid URL');
    }
    if (!parsed.hostname) throw new RedisUrlError('has no host');
    return { kind: 'single', url };
  }
  const hosts = hostList!.split(',').map((h, i) => {
    const hm = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+):(\d{1,5})$/.exec(h);
    const port = hm ? Number(hm[2]) : 0;
    if (!hm || port < 1 || port > 65535) throw new RedisUrlError(`lists a node (number ${i + 1}) that is not host:port`);
    return { host: hm[1]!.replace(/^\[|\]$/g, ''), port };
  });
  let username: string | undefined;
  let password: string | undefined;
  if (auth) {
    const colon = auth.indexOf(':');
    username = decodeURIComponent(colon < 0 ? auth : auth.slice(0, colon)) || undefined;
    password = colon < 0 ? undefined : decodeURIComponent(auth.slice(colon + 1));
  }
  const segments = (path ?? '').split('/').filter((s) => s !== '');
  if (mode === '-cluster') {
    if (segments.length > 0) throw new RedisUrlError('has a path, which a Cluster URL cannot have (Redis Cluster has database 0 only)');
    return { kind: 'cluster', nodes: hosts, tls, username, password };
  }
  const [name, db = '0', ...rest] = segments;
  if (!name || !/^[A-Za-z0-9._-]+$/.test(name)) throw new RedisUrlError('does not end with /<master name>, as a Sentinel URL must');
  if (rest.length > 0 || !/^\d{1,2}$/.test(db)) throw new RedisUrlError('has a Sentinel database that is not a number');
  return { kind: 'sentinel', sentinels: hosts, name, db: Number(db), tls, username, password };
}

/**
 * TLS settings for a `rediss…://` URL beyond the URL itself (docs/OPERATIONS.md
 * "TLS to Redis and PostgreSQL"), read from REDIS_TLS_* at start. Without any,
 * a `rediss…://` URL verifies the server against Node's bundled CAs and the
 * host name it connects to.
 */
export interface RedisTls {
  /** REDIS_TLS_CA_FILE's PEM: the CAs trusted for Redis (instead of Node's bundled ones). */
  ca?: string;
  /** REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE's PEM: a client certificate, for servers with `tls-auth-clients yes`. */
  cert?: string;
  key?: string;
  /**
   * REDIS_TLS_SERVERNAME: the name every Redis certificate is checked against
   * (and sent as SNI), for Sentinel and Cluster nodes, which are announced by
   * IP address: without it the certificate must name that address.
   */
  servername?: string;
}

/** What a Redis client is built from: REDIS_URL, and the TLS settings when it uses TLS. */
export type RedisTarget = string | { url: string; tls?: RedisTls | undefined };

/** Cluster-level options (the rest go to every node connection). */
const CLUSTER_KEYS = ['enableOfflineQueue', 'retryStrategy', 'lazyConnect'] as const;

/** How createRedis builds a client: ioredis's constructor arguments, by topology (exported for tests). */
export type RedisClientPlan =
  | { kind: 'single'; url: string; options: RedisOptions }
  | { kind: 'sentinel'; options: RedisOptions }
  | { kind: 'cluster'; nodes: Array<{ host: string; port: number }>; options: ClusterOptions };

/** The options every connection of `tls` gets; {} when TLS is on with nothing beyond the URL. */
function tlsOptions(tls: RedisTls | undefined): NonNullable<RedisOptions['tls']> {
  const out: NonNullable<RedisOptions['tls']> = {};
  if (tls?.ca !== undefined) out.ca = tls.ca;
  if (tls?.cert !== undefined) out.cert = tls.cert;
  if (tls?.key !== undefined) out.key = tls.key;
  if (tls?.servername !== undefined) out.servername = tls.servername;
  return out;
}

/**
 * One set of connection options for every Redis client we open: commands fail
 * fast while Redis is down (callers have their own fallbacks) instead of
 * queueing without bound, and the client keeps reconnecting in the background.
 *
 * The URL picks the topology: one server, a Sentinel-managed master (the
 * client asks the sentinels where the master is on every reconnect, so a
 * failover is a reconnect), or a Cluster. `rediss…://` turns TLS on for every
 * connection: the data nodes and, under Sentinel, the sentinels too.
 */
export function redisClientPlan(target: RedisTarget, overrides: RedisOptions = {}, cluster: { shardedSubscribers?: boolean } = {}): RedisClientPlan {
  const { url, tls: extra } = typeof target === 'string' ? { url: target, tls: undefined } : target;
  const options: RedisOptions = {
    connectTimeout: 2000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
    ...overrides,
  };
  const topology = parseRedisUrl(url);
  const secure = topology.kind === 'single' ? url.startsWith('rediss://') : topology.tls;
  if (extra && !secure) throw new RedisUrlError('is not a TLS URL (rediss://, rediss-sentinel:// or rediss-cluster://), but TLS settings were given');
  // ioredis reads the URL first and takes options only for what it left unset: the URL never sets `tls` itself.
  const tls = secure ? { tls: tlsOptions(extra) } : {};
  if (topology.kind === 'single') return { kind: 'single', url, options: { ...options, ...tls } };
  const auth = { username: topology.username, password: topology.password };
  if (topology.kind === 'sentinel') {
    return {
      kind: 'sentinel',
      options: {
        ...options,
        ...auth,
        ...tls,
        sentinels: topology.sentinels,
        name: topology.name,
        db: topology.db,
        sentinelPassword: topology.password,
        sentinelUsername: topology.username,
        // The master (found through the sentinels) and the sentinels themselves, both over TLS.
        ...(secure ? { enableTLSForSentinelMode: true, sentinelTLS: tlsOptions(extra) } : {}),
        // A sentinel that is itself down must not stop the search for the master.
        sentinelRetryStrategy: (times) => Math.min(100 * times, 1000),
        // Subscribe to +switch-master so a failover is noticed at once rather than at the next failed command.
        failoverDetector: true,
      },
    };
  }
  const nodeOptions: RedisOptions = { ...options, ...auth, ...tls };
  for (const k of CLUSTER_KEYS) delete nodeOptions[k];
  const retry = options.retryStrategy;
  return {
    kind: 'cluster',
    nodes: topology.nodes,
    options: {
      enableOfflineQueue: options.enableOfflineQueue,
      lazyConnect: options.lazyConnect,
      clusterRetryStrategy: retry === null || retry === undefined ? () => null : (times) => retry(times),
      // A moved slot or a promoted replica: retry the command shortly instead of failing it at once.
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      slotsRefreshTimeout: 2000,
      shardedSubscribers: cluster.shardedSubscribers === true,
      // ioredis 5 refreshes its slot map only on MOVED or a lost node; a
      // sharded subscriber sends nothing that could be MOVED, so it also
      // looks every 5 s: a failover or resharding is followed without either.
      ...(cluster.shardedSubscribers === true && { slotsRefreshInterval: 5000 }),
      // Every node connection, the seeds and those CLUSTER SLOTS names (TLS included).
      redisOptions: nodeOptions,
    },
  };
}

/**
 * A Redis client for `target` (see redisClientPlan). A Cluster client is
 * returned as `Redis`: it has the same command, script, pipeline and pub/sub
 * surface that our drivers use; what differs (one slot per script or
 * pipeline) is the key layout's job (hash tags: docs/OPERATIONS.md "Redis
 * high availability"). `cluster.shardedSubscribers` (Cluster only) makes
 * SSUBSCRIBE go to the master serving each channel's slot, one connection
 * per master (redis-sharded.ts watches them).
 */
export function createRedis(target: RedisTarget, overrides: RedisOptions = {}, cluster: { shardedSubscribers?: boolean } = {}): Redis {
  const plan = redisClientPlan(target, overrides, cluster);
  if (plan.kind === 'single') return new Redis(plan.url, plan.options);
  if (plan.kind === 'sentinel') return new Redis(plan.options);
  return new Cluster(plan.nodes, plan.options) as unknown as Redis;
}

/** True for a client built from a `redis-cluster://` URL. */
export function isCluster(client: Redis): boolean {
  return (client as unknown as { isCluster?: boolean }).isCluster === true;
}

/** How long a write waits for the Sentinel replica's acknowledgement (WAIT) before it is answered anyway. */
export const REPLICA_WAIT_MS = 250;

/**
 * Replication is asynchronous: a write the master answered but had not yet
 * sent to its replica is lost when that replica is promoted (Sentinel, or a
 * Cluster's own failover). For writes we acknowledge to a client (a publish)
 * or that a revocation depends on (the key cache's floor), WAIT until a
 * replica has it. Resolves to the replicas that acknowledged (0 after
 * REPLICA_WAIT_MS without one: the write stands, without the failover
 * guarantee, and for the next second writes to that server do not wait);
 * undefined where there is nothing to fail over to: one server, or a
 * Cluster slot served by a master without a replica.
 *
 * On a Cluster, WAIT has no key, so ioredis would send it to any node: it
 * goes instead on the connection of the master serving `key`'s slot, the
 * one the write just used (WAIT counts that connection's last write). No
 * `key`, no WAIT on a Cluster.
 */
export async function waitForReplica(client: Redis, key?: string): Promise<number | undefined> {
  let conn: Redis = client;
  if (isCluster(client)) {
    const owner = key === undefined ? undefined : slotOwner(client, key);
    if (!owner?.replicas) return undefined;
    const node = (client as unknown as ClusterInternals).connectionPool.getInstanceByKey(owner.node);
    if (!node) return 0;
    conn = node;
  } else if (!client.options.sentinels) {
    return undefined;
  }
  // WAIT blocks the connection: without a replica (the old master not yet back
  // after a failover), one WAIT a second, not one per write.
  if ((unreplicatedUntil.get(conn) ?? 0) > Date.now()) return 0;
  const replicas = (await conn.call('WAIT', 1, REPLICA_WAIT_MS)) as number;
  if (replicas === 0) unreplicatedUntil.set(conn, Date.now() + 1000);
  return replicas;
}

/** The parts of ioredis's Cluster that say which node serves a slot (stable across ioredis 5; cluster-ha tests cover them). */
interface ClusterInternals {
  slots: string[][];
  connectionPool: { getInstanceByKey(nodeKey: string): Redis | undefined };
}

/**
 * On a Cluster: the node (`host:port`) serving `key`'s slot as master as
 * ioredis last learned it, and how many replicas Redis listed for the slot
 * (a replica marked failed is not listed). Undefined off a Cluster or
 * before the slot map is known.
 */
export function slotOwner(client: Redis, key: string): { node: string; replicas: number } | undefined {
  if (!isCluster(client)) return undefined;
  const nodes = (client as unknown as ClusterInternals).slots[calculateSlot(key)];
  if (!nodes?.[0]) return undefined;
  return { node: nodes[0], replicas: nodes.length - 1 };
}

const unreplicatedUntil = new WeakMap<Redis, number>();

/**
 * On a Cluster, ioredis keeps pub/sub on one node's connection and, when that
 * node goes away, moves it to another node and subscribes again there, but
 * the Cluster emits nothing: what was published meanwhile is missed without
 * anyone knowing. This watches ioredis's subscriber connection (an internal
 * field, checked every `everyMs`): `lost` when the connection in use closes,
 * `moved` once a replacement is ready, so the caller can hold live messages
 * from the loss and refill from its streams. No-op off a Cluster (there the
 * client's own 'close' and 'ready' tell the same story).
 */
export function watchClusterSubscriber(client: Redis, on: { lost(): void; moved(): void }, everyMs = 200): () => void {
  if (!isCluster(client)) return () => {};
  const holder = client as unknown as { subscriber?: { getInstance(): Redis | null } };
  let current: Redis | null = null;
  let hadOne = false;
  const look = () => {
    const now = holder.subscriber?.getInstance() ?? null;
    if (now === current) return;
    current = now;
    if (now === null) return;
    now.once('close', () => {
      if (current === now) on.lost();
    });
    const moved = hadOne;
    hadOne = true;
    if (!moved) return;
    on.lost();
    if (now.status === 'ready') on.moved();
    else now.once('ready', () => on.moved());
  };
  look();
  const timer = setInterval(look, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Resolves once the client is ready; rejects after `ms`. */
export function redisReady(client: Redis, ms = 5000): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(new Error(`redis not ready after ${ms} ms`));
    }, ms);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}

export async function redisPing(client: Redis): Promise<boolean> {
  if (client.status !== 'ready') return false;
  try {
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  }
}
