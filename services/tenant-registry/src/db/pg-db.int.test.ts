import { createServer, connect, type Server, type Socket } from 'node:net';
import { isRelayError } from '@service-relay/core';
import { createTestDatabase, type TestDatabase } from '@service-relay/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PgDb } from './pg-db';

/**
 * A TCP relay in front of the real PostgreSQL that can hang like a SIGSTOPped
 * server: frozen, it accepts connections and keeps every socket open, but
 * passes no byte either way until thawed.
 */
class FreezableRelay {
  private frozen = false;
  private readonly pairs = new Set<[Socket, Socket]>();
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<FreezableRelay> {
    const self: { relay?: FreezableRelay } = {};
    const server = createServer((client) => {
      const relay = self.relay;
      const upstream = connect(target.port, target.host);
      const pair: [Socket, Socket] = [client, upstream];
      relay!.pairs.add(pair);
      for (const s of pair) {
        s.on('error', () => {});
        s.on('close', () => {
          relay!.pairs.delete(pair);
          client.destroy();
          upstream.destroy();
        });
      }
      client.on('data', (d) => upstream.write(d));
      upstream.on('data', (d) => client.write(d));
      if (relay!.frozen) for (const s of pair) s.pause();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self.relay = new FreezableRelay(server, (server.address() as { port: number }).port);
    return self.relay;
  }

  freeze(): void {
    this.frozen = true;
    for (const pair of this.pairs) for (const s of pair) s.pause();
  }

  thaw(): void {
    this.frozen = false;
    for (const pair of this.pairs) for (const s of pair) s.resume();
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) for (const s of pair) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

const TIMEOUT_MS = 300;

async function timed<T>(p: Promise<T>): Promise<{ ms: number; err: unknown }> {
  const started = performance.now();
  try {
    await p;
    return { ms: performance.now() - started, err: undefined };
  } catch (err) {
    return { ms: performance.now() - started, err };
  }
}

const code = (err: unknown) => (isRelayError(err) ? err.code : `not a RelayError: ${(err as Error | undefined)?.message}`);

describe('PgDb against a hung PostgreSQL (a relay that stops passing bytes)', () => {
  let database: TestDatabase;
  let relay: FreezableRelay;
  let db: PgDb;

  beforeEach(async () => {
    database = await createTestDatabase('pgdb_hung');
    const url = new URL(database.url);
    relay = await FreezableRelay.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.host = `127.0.0.1:${relay.port}`;
    db = new PgDb(url.toString(), { max: 3, timeoutMs: TIMEOUT_MS, probeMs: 50 });
    await db.query('CREATE TABLE t (id int PRIMARY KEY)');
  });

  afterEach(async () => {
    relay.thaw();
    await db.close();
    await relay.close();
    await database.drop();
  });

  it('answers `unavailable` within its budget, then at once while hung, and serves again once the server answers', async () => {
    relay.freeze();
    const first = await timed(db.query('SELECT 1'));
    expect(code(first.err)).toBe('unavailable');
    expect(first.ms).toBeLessThan(TIMEOUT_MS + 150);
    expect(db.silent).toBe(true);

    // Known silent: no caller waits out a budget again.
    const next = await Promise.all([timed(db.query('SELECT 1')), timed(db.transaction((tx) => tx.query('SELECT 1'))), timed(db.query('INSERT INTO t VALUES (1)'))]);
    for (const r of next) {
      expect(code(r.err)).toBe('unavailable');
      expect(r.ms).toBeLessThan(50);
    }
    expect(await db.ping()).toBe(false);

    relay.thaw();
    const deadline = Date.now() + 5000;
    while (!(await db.ping()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(db.silent).toBe(false);
    expect(await db.query<{ n: number }>('SELECT 2 AS n')).toEqual([{ n: 2 }]);
  });

  it('a transaction hung mid-way fails `unavailable` within the budget, commits nothing, and its row lock is gone once the server answers', async () => {
    const started = performance.now();
    const tx = db.transaction(async (q) => {
      await q.query('INSERT INTO t VALUES (7)');
      relay.freeze();
      await q.query('SELECT pg_sleep(0)');
    });
    const r = await timed(tx);
    expect(code(r.err)).toBe('unavailable');
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + 150);
    relay.thaw();
    // The destroyed connection's transaction rolled back: the key is free to insert (no lock wait, no duplicate).
    const deadline = Date.now() + 5000;
    while (!(await db.ping()) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    await db.query('INSERT INTO t VALUES (7)');
    expect(await db.query('SELECT id FROM t')).toEqual([{ id: 7 }]);
  });

  it('a busy pool is not a silent server: callers past the budget get `unavailable`, later ones are served', async () => {
    // Every connection held by work of its own for longer than the budget (the server answers everything).
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    const holders = Array.from({ length: 3 }, () => timed(db.transaction(async (q) => {
      await q.query('SELECT 1');
      await held;
    })));
    const queued = await timed(db.query('SELECT 1'));
    release();
    await Promise.all(holders);
    expect(code(queued.err)).toBe('unavailable');
    expect(db.silent).toBe(false);
    expect(await db.query<{ n: number }>('SELECT 3 AS n')).toEqual([{ n: 3 }]);
  });

  it('a statement error passes through unchanged and rolls the transaction back', async () => {
    await db.query('INSERT INTO t VALUES (1)');
    const r = await timed(db.transaction(async (q) => {
      await q.query('INSERT INTO t VALUES (2)');
      await q.query('INSERT INTO t VALUES (1)');
    }));
    expect((r.err as { code?: string }).code).toBe('23505');
    expect(await db.query('SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }]);
    expect(db.silent).toBe(false);
  });
});
