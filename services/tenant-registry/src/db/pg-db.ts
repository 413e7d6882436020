import pg from 'pg';
import type { Db, Queryable } from './db';
import { classifyDbError } from './db-errors';

/** PostgreSQL through a pg Pool; each transaction holds one pooled client. */
export class PgDb implements Db {
  private readonly pool: pg.Pool;

  constructor(url: string, poolSize = 10) {
    this.pool = new pg.Pool({ connectionString: url, max: poolSize, connectionTimeoutMillis: 2000, query_timeout: 5000 });
    // An idle client losing its connection must not crash the process; the
    // next query gets a fresh one.
    this.pool.on('error', () => {});
  }

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    try {
      const res = await this.pool.query(sql, params as unknown[]);
      return res.rows as R[];
    } catch (err) {
      throw classifyDbError(err);
    }
  }

  async exec(sql: string): Promise<void> {
    await this.query(sql);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    try {
      return await this.inTransaction(fn);
    } catch (err) {
      throw classifyDbError(err);
    }
  }

  private async inTransaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    // A held client whose connection drops emits 'error' (the pool listens only
    // to idle ones); unheard, that would crash the process. The failing query
    // rejects anyway; the client is destroyed on release.
    const onLost = () => {
      broken = true;
    };
    client.on('error', onLost);
    const tx: Queryable = {
      query: async <R>(sql: string, params: readonly unknown[] = []) => (await client.query(sql, params as unknown[])).rows as R[],
      exec: async (sql: string) => {
        await client.query(sql);
      },
    };
    try {
      await client.query('BEGIN');
      const result = await fn(tx);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      // A client whose rollback failed is in an unknown state: destroy it.
      client.off('error', onLost);
      client.release(broken);
    }
  }

  async ping(): Promise<boolean> {
    try {
      await this.pool.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
