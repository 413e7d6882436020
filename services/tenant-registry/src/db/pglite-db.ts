import { mkdirSync } from 'node:fs';
import { Mutex, PGlite } from '@electric-sql/pglite';
import type { Db, Queryable } from './db';

/**
 * Embedded PostgreSQL on disk. PGlite is one connection, so a transaction must
 * not interleave with other statements: everything runs under one mutex, and
 * statements inside a transaction use the handle that already holds it.
 */
export class PGliteDb implements Db {
  private readonly mutex = new Mutex();
  private closed = false;
  /** Embedded: there is no server to go silent. */
  readonly silent = false;

  private constructor(private readonly pg: PGlite) {}

  static async open(dir: string): Promise<PGliteDb> {
    mkdirSync(dir, { recursive: true });
    const pg = await PGlite.create(dir);
    return new PGliteDb(pg);
  }

  query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    return this.mutex.runExclusive(() => this.rawQuery<R>(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.mutex.runExclusive(async () => {
      await this.pg.exec(sql);
    });
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.mutex.runExclusive(async () => {
      const tx: Queryable = {
        query: <R>(sql: string, params: readonly unknown[] = []) => this.rawQuery<R>(sql, params),
        exec: async (sql: string) => {
          await this.pg.exec(sql);
        },
      };
      await this.pg.exec('BEGIN');
      try {
        const result = await fn(tx);
        await this.pg.exec('COMMIT');
        return result;
      } catch (err) {
        await this.pg.exec('ROLLBACK');
        throw err;
      }
    });
  }

  async ping(): Promise<boolean> {
    if (this.closed) return false;
    try {
      await this.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.mutex.runExclusive(() => this.pg.close());
  }

  private async rawQuery<R>(sql: string, params: readonly unknown[]): Promise<R[]> {
    const res = await this.pg.query<R>(sql, params as unknown[]);
    return res.rows;
  }
}
