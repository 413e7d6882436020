import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, createRedis, EnvReader, readRedisSettings, type Redis, type RedisSettings } from '@service-relay/core';
import * as registry from '@service-relay/tenant-registry';
import { RedisMessageBus } from '../../services/realtime/src/messaging/redis-message-bus';
import { PrivatePostgres } from '../faults/support/backends';
import { eventually } from '../faults/support/probes';
import { makeTestCerts, pem, REDIS_TLS_NAME, TlsRedis, type TestCerts } from './support/tls';

// TLS to Redis and PostgreSQL (#33 item 4), on real servers that accept TLS
// only: the services' own configuration loaders read REDIS_URL, REDIS_TLS_*
// and DATABASE_URL, and ioredis and node-postgres connect with what they
// made of them, for each form of REDIS_URL. Certificates are made with
// openssl for this file; the Redis servers require a client certificate and
// their certificate names only REDIS_TLS_NAME, not the address connected to.

let certs: TestCerts;
const clients: Redis[] = [];

beforeAll(async () => {
  certs = await makeTestCerts();
});

afterAll(() => {
  for (const c of clients.splice(0)) c.disconnect();
  certs?.cleanup();
});

/** What a service would read from its environment. */
function settings(url: string, extra: Record<string, string> = {}): RedisSettings {
  return readRedisSettings(new EnvReader({ REDIS_URL: url, REDIS_TLS_CA_FILE: certs.ca, REDIS_TLS_CERT_FILE: certs.clientCert, REDIS_TLS_KEY_FILE: certs.clientKey, REDIS_TLS_SERVERNAME: REDIS_TLS_NAME, ...extra }));
}

function client(s: RedisSettings, overrides: Parameters<typeof createRedis>[1] = {}): Redis {
  const c = createRedis({ url: s.url!, tls: s.tls }, overrides);
  c.on('error', () => {});
  clients.push(c);
  return c;
}

/** A command, a script and pub/sub through clients built from `s`. */
async function exercise(s: RedisSettings): Promise<void> {
  const cmd = client(s, { enableOfflineQueue: true });
  const sub = client(s, { enableOfflineQueue: true, maxRetriesPerRequest: null });
  const key = `tls:{${randomBytes(4).toString('hex')}}`;
  await cmd.set(key, 'over tls', 'EX', 60);
  expect(await cmd.get(key)).toBe('over tls');
  expect(await cmd.eval('return redis.call("GET", KEYS[1])', 1, key)).toBe('over tls');
  const got = new Promise<string>((resolve) => sub.once('message', (_channel: string, message: string) => resolve(message)));
  await sub.subscribe(`${key}:ch`);
  await cmd.publish(`${key}:ch`, 'hello');
  expect(await got).toBe('hello');
}

/** The first error a client built from `s` reports (bounded: 10 s), or 'connected' if it got a PONG. */
async function refusal(s: RedisSettings): Promise<string> {
  const c = client(s, { lazyConnect: true, enableOfflineQueue: true, maxRetriesPerRequest: 0 });
  try {
    return await new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('no answer within 10 s'), 10_000);
      c.once('error', (err: Error) => {
        clearTimeout(timer);
        resolve(err.message);
      });
      c.connect().then(
        () => c.ping().then(() => resolve('connected'), () => {}),
        () => {},
      );
    });
  } finally {
    c.disconnect();
  }
}

describe('rediss:// (one server, client certificates required)', () => {
  let server: TlsRedis;
  beforeAll(async () => {
    server = await TlsRedis.single(certs);
  });
  afterAll(() => server?.stop());

  it('connects with REDIS_TLS_CA_FILE, _CERT_FILE, _KEY_FILE and _SERVERNAME: commands, scripts, pub/sub', async () => {
    await exercise(settings(server.url));
  });

  it('fails closed: another CA, no server name for an address the certificate does not name, no client certificate', async () => {
    expect(await refusal(settings(server.url, { REDIS_TLS_CA_FILE: certs.otherCa }))).toMatch(/self[- ]signed|unable to (verify|get issuer)/i);
    const noName = readRedisSettings(new EnvReader({ REDIS_URL: server.url, REDIS_TLS_CA_FILE: certs.ca, REDIS_TLS_CERT_FILE: certs.clientCert, REDIS_TLS_KEY_FILE: certs.clientKey }));
    expect(await refusal(noName)).toMatch(/does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID/);
    const noClientCert = readRedisSettings(new EnvReader({ REDIS_URL: server.url, REDIS_TLS_CA_FILE: certs.ca, REDIS_TLS_SERVERNAME: REDIS_TLS_NAME }));
    expect(await refusal(noClientCert)).not.toMatch(/^(connected|no answer)/);
  });
});

describe('rediss-sentinel:// (the sentinel and the master it names, both TLS only)', () => {
  let group: TlsRedis;
  beforeAll(async () => {
    group = await TlsRedis.sentinel(certs);
  });
  afterAll(() => group?.stop());

  it('asks the sentinel over TLS and reaches the master over TLS', async () => {
    await exercise(settings(group.url));
  });

  it('fails closed with another CA', async () => {
    // ioredis reports the sentinel's TLS failure only as a closed connection.
    expect(await refusal(settings(group.url, { REDIS_TLS_CA_FILE: certs.otherCa }))).toMatch(/^All sentinels are unreachable/);
  });
});

describe('rediss-cluster:// (three TLS-only masters)', () => {
  let cluster: TlsRedis;
  beforeAll(async () => {
    cluster = await TlsRedis.cluster(certs);
  });
  afterAll(() => cluster?.stop());

  it('reaches every node CLUSTER SLOTS names over TLS: keys on all three masters, scripts, pub/sub', async () => {
    await exercise(settings(cluster.url));
    const c = client(settings(cluster.url), { enableOfflineQueue: true });
    // Enough keys that every master holds some.
    for (let i = 0; i < 30; i++) await c.set(`tls:spread:${i}`, String(i), 'EX', 60);
    for (let i = 0; i < 30; i++) expect(await c.get(`tls:spread:${i}`)).toBe(String(i));
  });

  it("carries realtime's sharded pub/sub over TLS: a subscription on each master, one message each", async () => {
    const s = settings(cluster.url);
    const target = { url: s.url!, tls: s.tls };
    const prefix = `tls:bus:${randomBytes(4).toString('hex')}:`;
    const logger = createLogger({ service: 'ha-tls', level: 'silent' });
    const [publisher, subscriber] = [new RedisMessageBus(target, prefix, { maxMessages: 10, ttlS: 60 }, logger), new RedisMessageBus(target, prefix, { maxMessages: 10, ttlS: 60 }, logger)];
    try {
      expect(subscriber.livePath).toBe('sharded');
      // Their slots (the hash tag {t:room-i}) fall on all three masters of `redis-cli --cluster create`'s even split.
      const refs = Array.from({ length: 12 }, (_, i) => ({ tenantId: 't', channel: `room-${i}` }));
      const got = new Set<string>();
      // Ids are per channel (two channels' messages can share one): counted with their channel.
      for (const ref of refs) await subscriber.subscribe(ref, (m) => got.add(`${ref.channel} ${m.id}`));
      const sent = await Promise.all(refs.map(async (ref) => `${ref.channel} ${(await publisher.publish(ref, 'u', '"over tls"')).id}`));
      await eventually('every message delivered', async () => got.size === sent.length, 5000, 20);
      expect([...got].sort()).toEqual(sent.sort());
    } finally {
      await Promise.all([publisher.close(), subscriber.close()]);
    }
  });
});

describe('PostgreSQL with sslmode=verify-full, and the registry on TLS PostgreSQL and TLS Redis', () => {
  let postgres: PrivatePostgres;
  let redis: TlsRedis;
  let server: registry.RegistryServer | undefined;
  beforeAll(async () => {
    [postgres, redis] = await Promise.all([PrivatePostgres.start({ tls: { cert: pem(certs.pgCert), key: pem(certs.pgKey) } }), TlsRedis.single(certs)]);
  });
  afterAll(async () => {
    await server?.stop();
    await Promise.all([postgres?.destroy(), redis?.stop()]);
  });

  const env = (databaseUrl: string) => ({
    DATABASE_URL: databaseUrl,
    REDIS_URL: redis.url,
    REDIS_TLS_CA_FILE: certs.ca,
    REDIS_TLS_CERT_FILE: certs.clientCert,
    REDIS_TLS_KEY_FILE: certs.clientKey,
    REDIS_TLS_SERVERNAME: REDIS_TLS_NAME,
    ADMIN_TOKEN: randomBytes(32).toString('base64url'),
    INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
    SECRETS_KEY: randomBytes(32).toString('base64'),
    REGISTRY_HTTP_PORT: '0',
    REGISTRY_GRPC_PORT: '0',
    REGISTRY_OPS_PORT: '0',
    LOG_LEVEL: 'warn',
  });

  it('serves: /readyz names the database and the bus ready, an admin call commits, and every connection of the registry is encrypted', async () => {
    const config = registry.loadConfig(env(`postgres://postgres@127.0.0.1:${postgres.port}/postgres?sslmode=verify-full&sslrootcert=${certs.ca}`), { standalone: true });
    server = registry.createServer(config);
    await server.start();
    const ready = await fetch(`http://127.0.0.1:${server.opsPort}/readyz`);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { tenant_feed: true, feed_mirror: true, tenant_events: true, secrets_keyring: true } });
    const created = await fetch(`http://127.0.0.1:${server.httpPort}/admin/tenants`, { method: 'POST', headers: { authorization: `Bearer ${config.adminToken}` } });
    expect(created.status).toBe(201);
    const rows = await postgres.query<{ ssl: boolean; n: string }>(
      "SELECT s.ssl, count(*) AS n FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name LIKE 'tenant-registry%' GROUP BY s.ssl",
    );
    expect(rows.map((r) => ({ ssl: r.ssl, some: Number(r.n) > 0 }))).toEqual([{ ssl: true, some: true }]);
  });

  it('fails closed on a server its CA did not sign: the registry does not start', async () => {
    const config = registry.loadConfig(env(`postgres://postgres@127.0.0.1:${postgres.port}/postgres?sslmode=verify-full&sslrootcert=${certs.otherCa}`), { standalone: true });
    const other = registry.createServer(config);
    // Its start opens the database and runs the migrations: it cannot.
    await expect(other.start()).rejects.toThrow(/self[- ]signed|unable to (verify|get issuer)|unavailable/i);
    await other.stop();
  });
});
