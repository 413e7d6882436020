import { Redis, type RedisOptions } from 'ioredis';

export type { Redis } from 'ioredis';

/**
 * One set of connection options for every Redis client we open: commands fail
 * fast while Redis is down (callers have their own fallbacks) instead of
 * queueing without bound, and the client keeps reconnecting in the background.
 */
export function createRedis(url: string, overrides: RedisOptions = {}): Redis {
  return new Redis(url, {
    connectTimeout: 2000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
    ...overrides,
  });
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
