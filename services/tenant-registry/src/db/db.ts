/** What the store needs from a connection or a transaction. */
export interface Queryable {
  /** One statement with $1.. parameters. */
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** Several statements, no parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/**
 * The registry's database: PostgreSQL (pg-db.ts) or embedded PGlite
 * (pglite-db.ts). Both run the same SQL.
 */
export interface Db extends Queryable {
  /** Runs fn in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  ping(): Promise<boolean>;
  /** The server is known not to answer right now (operations fail `unavailable` at once); PGlite never is. */
  readonly silent: boolean;
  close(): Promise<void>;
}
