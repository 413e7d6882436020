import { describe, expect, it } from 'vitest';
import { EnvReader, readRedisSettings } from './config';
import { parseRedisUrl } from './redis';

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
