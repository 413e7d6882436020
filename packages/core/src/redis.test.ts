import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { EnvReader } from './config';
import { readRedisSettings } from './redis-config';
import { parseRedisUrl, redisClientPlan } from './redis';

describe('REDIS_URL forms', () => {
  it.each([
    ['redis://127.0.0.1:6379', { kind: 'single', url: 'redis://127.0.0.1:6379' }],
    ['rediss://u:p@redis.example:6380/2', { kind: 'single', url: 'rediss://u:p@redis.example:6380/2' }],
    [
      'redis-sentinel://s1:26379,s2:26380,[::1]:26381/mymaster',
      { kind: 'sentinel', sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26380 }, { host: '::1', port: 26381 }], name: 'mymaster', db: 0, tls: false, username: undefined, password: undefined },
    ],
    [
      'rediss-sentinel://:s%40cret@s1:26379/relay-master/3',
      { kind: 'sentinel', sentinels: [{ host: 's1', port: 26379 }], name: 'relay-master', db: 3, tls: true, username: undefined, password: 's@cret' },
    ],
    [
      'redis-cluster://alice:pw@n1:7000,n2:7001',
      { kind: 'cluster', nodes: [{ host: 'n1', port: 7000 }, { host: 'n2', port: 7001 }], tls: false, username: 'alice', password: 'pw' },
    ],
  ])('%s', (url, want) => {
    expect(parseRedisUrl(url)).toEqual(want);
  });

  it.each([
    'http://127.0.0.1:6379',
    'redis-sentinel://s1:26379',
    'redis-sentinel://s1:26379/my master',
    'redis-sentinel://s1:26379/m/x',
    'redis-sentinel://s1/m',
    'redis-cluster://n1:7000,n2/',
    'redis-cluster://n1:7000/0',
    'redis-cluster://n1:70000',
    'redis-cluster://',
  ])('refuses %s at start, naming the accepted forms and not echoing the URL', (url) => {
    const env = new EnvReader({ REDIS_URL: url.replace('s1', 'pw-in-url-s1') });
    expect(() => readRedisSettings(env)).toThrow(/REDIS_URL .*accepted forms: redis\[s\]:\/\/.*-sentinel:\/\/.*-cluster:\/\//);
    try {
      readRedisSettings(env);
    } catch (err) {
      expect((err as Error).message).not.toContain('pw-in-url');
    }
  });
});

describe('TLS (rediss…:// and REDIS_TLS_*)', () => {
  // A throwaway self-signed pair: only its PEM shape matters here (tests/ha/tls.test.ts connects with real ones).
  const dir = mkdtempSync(join(tmpdir(), 'relay-redis-tls-'));
  const pem = (label: string) => `-----BEGIN ${label}-----\nMIIB\n-----END ${label}-----\n`;
  const files = {
    ca: join(dir, 'ca.pem'),
    cert: join(dir, 'client.pem'),
    key: join(dir, 'client-key.pem'),
    notPem: join(dir, 'not.pem'),
  };
  writeFileSync(files.ca, pem('CERTIFICATE'));
  writeFileSync(files.cert, pem('CERTIFICATE'));
  writeFileSync(files.key, pem('PRIVATE KEY'));
  writeFileSync(files.notPem, 'hello');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const all = { REDIS_TLS_CA_FILE: files.ca, REDIS_TLS_CERT_FILE: files.cert, REDIS_TLS_KEY_FILE: files.key, REDIS_TLS_SERVERNAME: 'redis.internal.example' };
  const want = { ca: pem('CERTIFICATE'), cert: pem('CERTIFICATE'), key: pem('PRIVATE KEY'), servername: 'redis.internal.example' };
  const settings = (env: Record<string, string>) => readRedisSettings(new EnvReader(env));

  it('reads the CA, the client certificate and the server name at start, for every TLS form', () => {
    for (const url of ['rediss://:pw@redis:6380/0', 'rediss-sentinel://:pw@s1:26379,s2:26379/relay', 'rediss-cluster://:pw@n1:7000,n2:7000']) {
      expect(settings({ REDIS_URL: url, ...all })).toEqual({ url, prefix: 'relay:', tls: want });
    }
    expect(settings({ REDIS_URL: 'rediss://redis:6380' })).toEqual({ url: 'rediss://redis:6380', prefix: 'relay:' });
  });

  it.each([
    [{ REDIS_URL: 'redis://redis:6379', REDIS_TLS_CA_FILE: files.ca }, 'REDIS_TLS_CA_FILE is set, but REDIS_URL does not use TLS'],
    [{ REDIS_URL: 'redis-sentinel://s1:26379/relay', REDIS_TLS_SERVERNAME: 'x.example' }, 'REDIS_TLS_SERVERNAME is set, but REDIS_URL does not use TLS'],
    [{ REDIS_TLS_CA_FILE: files.ca }, 'REDIS_TLS_CA_FILE is set, but REDIS_URL does not use TLS'],
    [{ REDIS_URL: 'rediss://redis:6380', REDIS_TLS_CA_FILE: join(dir, 'missing.pem') }, 'REDIS_TLS_CA_FILE names a file that cannot be read (ENOENT)'],
    [{ REDIS_URL: 'rediss://redis:6380', REDIS_TLS_CA_FILE: files.notPem }, 'REDIS_TLS_CA_FILE names a file that holds no PEM certificate'],
    [{ REDIS_URL: 'rediss://redis:6380', REDIS_TLS_KEY_FILE: files.ca }, 'REDIS_TLS_KEY_FILE names a file that holds no PEM private key'],
    [{ REDIS_URL: 'rediss://redis:6380', REDIS_TLS_CERT_FILE: files.cert }, 'REDIS_TLS_KEY_FILE is required with the other'],
    [{ REDIS_URL: 'rediss://redis:6380', REDIS_TLS_SERVERNAME: 'not a name' }, 'REDIS_TLS_SERVERNAME must be a host name'],
  ])('refuses %j at start: %s', (env, message) => {
    expect(() => settings(env as Record<string, string>)).toThrow(`configuration error: ${message}`);
  });

  it('never echoes a file it refused', () => {
    writeFileSync(files.notPem, 'secret-looking-content');
    expect(() => settings({ REDIS_URL: 'rediss://redis:6380', REDIS_TLS_KEY_FILE: files.notPem })).toThrow(/^(?!.*secret-looking).*$/s);
  });

  it('hands ioredis TLS options for the data nodes, and under Sentinel for the sentinels as well', () => {
    const single = redisClientPlan({ url: 'rediss://:pw@redis:6380/2', tls: want });
    expect(single).toMatchObject({ kind: 'single', url: 'rediss://:pw@redis:6380/2', options: { tls: want } });
    // ioredis reads the URL first and fills the rest from the options: its TLS options are ours.
    const client = new Redis(single.kind === 'single' ? single.url : '', { ...single.options, lazyConnect: true });
    expect(client.options).toMatchObject({ host: 'redis', port: 6380, db: 2, password: 'pw', tls: want });
    client.disconnect();

    const sentinel = redisClientPlan({ url: 'rediss-sentinel://u:pw@s1:26379,s2:26380/relay/1', tls: want });
    expect(sentinel).toMatchObject({
      kind: 'sentinel',
      options: { sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 26380 }], name: 'relay', db: 1, username: 'u', password: 'pw', sentinelUsername: 'u', sentinelPassword: 'pw', tls: want, enableTLSForSentinelMode: true, sentinelTLS: want },
    });

    const cluster = redisClientPlan({ url: 'rediss-cluster://:pw@n1:7000,n2:7001', tls: want });
    expect(cluster).toMatchObject({ kind: 'cluster', nodes: [{ host: 'n1', port: 7000 }, { host: 'n2', port: 7001 }], options: { redisOptions: { password: 'pw', tls: want } } });
  });

  it('turns TLS on with nothing but the URL, and off for redis…:// URLs', () => {
    expect(redisClientPlan('rediss://redis:6380')).toMatchObject({ options: { tls: {} } });
    expect(redisClientPlan('rediss-sentinel://s1:26379/relay')).toMatchObject({ options: { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } });
    expect(redisClientPlan('rediss-cluster://n1:7000')).toMatchObject({ options: { redisOptions: { tls: {} } } });
    for (const url of ['redis://redis:6379', 'redis-sentinel://s1:26379/relay']) {
      const plan = redisClientPlan(url);
      expect(plan.options).not.toHaveProperty('tls');
      expect(plan.options).not.toHaveProperty('enableTLSForSentinelMode');
    }
    expect((redisClientPlan('redis-cluster://n1:7000').options as { redisOptions: object }).redisOptions).not.toHaveProperty('tls');
    expect(() => redisClientPlan({ url: 'redis://redis:6379', tls: { servername: 'x' } })).toThrow(/not a TLS URL/);
  });

  it("asks for ioredis's sharded subscribers (and a slot map read every 5 s) only when told, on a Cluster", () => {
    expect(redisClientPlan('redis-cluster://n1:7000', {}, { shardedSubscribers: true }).options).toMatchObject({ shardedSubscribers: true, slotsRefreshInterval: 5000 });
    const plain = redisClientPlan('redis-cluster://n1:7000').options;
    expect(plain).toMatchObject({ shardedSubscribers: false });
    expect(plain).not.toHaveProperty('slotsRefreshInterval');
    expect(redisClientPlan('redis://redis:6379', {}, { shardedSubscribers: true }).options).not.toHaveProperty('shardedSubscribers');
  });
});
