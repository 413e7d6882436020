import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ConfigError, LEGACY_KEY_ID, sealedKeyId, sealedPrefix, type Keyring, type Logger } from '@service-relay/core';
import { legacyHostSyncHashKey } from '../crypto/host-sync-hasher';
import type { Db, Queryable } from '../db/db';
import { HASH_KEY_AAD, keyringStore, type KeyringRow } from './keyring-store';
import { reencryptStep, type StepResult } from './reencrypt';
import { SEALED_TABLES } from './sealed-columns';
import { secretsKeyStatus, type SecretsKeyStatus } from './secrets-key-status';

export interface KeyringCoordinatorOptions {
  /** The registry's maintenance connection: the start check, re-encryption and counts (long statements, not the serving pools). */
  db: Db;
  /**
   * Where this replica reports itself and takes the lease every second: the
   * serving pool (short statements), so an hour's pruning on the maintenance
   * connection never makes a running replica look gone. Default `db`.
   */
  liveDb?: Db;
  keyring: Keyring;
  /** The variable a refusal names: SECRETS_KEYS when it is set, else SECRETS_KEY. */
  variable: string;
  /** Rows re-sealed per transaction (SECRETS_REENCRYPT_BATCH). */
  batch: number;
  logger: Logger;
  /** How often a registry reports itself, reads the active key and works (default 1 s). */
  tickMs?: number;
  /** A registry not heard from for this long is gone (default 30 s). */
  holderExpiryMs?: number;
  /** The re-encryption lease (default 10 s). */
  leaseMs?: number;
  /** How long one tick re-encrypts before it reports itself again (default 500 ms; tests step by hand with 0). */
  workSliceMs?: number;
}

/** Past a "done", the counts are checked again this often anyway (a full scan of the sealed columns). */
const RECHECK_DONE_MS = 300_000;

/**
 * SECRETS_KEYS on one registry replica (docs/OPERATIONS.md "Rotating
 * SECRETS_KEY"). At start (join) it refuses to run when a stored secret is
 * sealed under a key it lacks, or when it lacks the key the database says
 * seals; it then records itself and its key ids. Every tick it reports
 * itself again and seals with the database's active key. The replica that
 * holds the lease makes its newest key the active one once every registry
 * heard from has that key, then re-encrypts every stored secret under it
 * in batches (reencrypt.ts).
 */
export class KeyringCoordinator {
  /** This replica in secrets_key_holders and the lease: host name (a pod's name), pid, a random suffix. */
  readonly holder = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly tickMs: number;
  private readonly expiryMs: number;
  private readonly leaseMs: number;
  private readonly workSliceMs: number;
  private hashKey: Buffer | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private leased = false;
  /** The last pass found nothing left (reset when the active key changes). */
  private doneAt = 0;
  private readonly said = new Set<string>();
  private lacking: string | undefined;

  constructor(private readonly o: KeyringCoordinatorOptions) {
    this.tickMs = o.tickMs ?? 1000;
    this.expiryMs = o.holderExpiryMs ?? 30_000;
    this.leaseMs = o.leaseMs ?? 10_000;
    this.workSliceMs = o.workSliceMs ?? 500;
  }

  get keyring(): Keyring {
    return this.o.keyring;
  }

  /**
   * Readiness: false while the database says a key seals that this replica
   * does not have (it could not open what the others seal now; only a replica
   * cut off from the database while a key was activated can get there).
   */
  get ready(): boolean {
    return this.hashKey !== undefined && this.lacking === undefined;
  }

  /** The host-sync hash key, known once join() resolved. */
  get hostSyncHashKey(): Buffer {
    if (!this.hashKey) throw new Error('KeyringCoordinator: join() first');
    return this.hashKey;
  }

  /**
   * The start check and registration, in one transaction holding the
   * keyring row (so no activation slips between the check and the record).
   * Throws a ConfigError naming the variable when this replica could not
   * open what is stored or what others seal; resolves to the host-sync hash key.
   */
  async join(): Promise<Buffer> {
    const { keyring, variable } = this.o;
    this.hashKey = await this.o.db.transaction(async (tx) => {
      const row = await keyringStore.row(tx, true);
      const counts = await keyringStore.counts(tx, row);
      const missing = Object.keys(counts).filter((id) => counts[id]! > 0 && !keyring.has(id));
      if (missing.length > 0) {
        const n = missing.reduce((sum, id) => sum + counts[id]!, 0);
        throw new ConfigError(
          variable,
          `lacks key ${missing.join(', ')}, which sealed ${n} stored secret${n === 1 ? '' : 's'}: configure it again (an entry of SECRETS_KEYS, or SECRETS_KEY for ${LEGACY_KEY_ID}) until GET /admin/secrets-key counts none under it (docs/OPERATIONS.md "Rotating SECRETS_KEY")`,
        );
      }
      await this.checkSameKeys(tx, counts);
      const active = row.activeKeyId ?? (keyring.has(LEGACY_KEY_ID) ? LEGACY_KEY_ID : keyring.newest);
      if (!keyring.has(active)) {
        throw new ConfigError(variable, `lacks key ${active}, which seals new secrets on the other registries: configure it (docs/OPERATIONS.md "Rotating SECRETS_KEY")`);
      }
      const hashKey = this.openHashKey(row);
      // A first start decides the active key; the hash key is stored sealed as soon as k0 no longer seals.
      if (row.activeKeyId === null || (row.hostSyncHashKey === null && active !== LEGACY_KEY_ID)) {
        const sealedHashKey = row.hostSyncHashKey ?? (active === LEGACY_KEY_ID ? null : keyring.seal(hashKey.toString('base64'), HASH_KEY_AAD, active));
        await keyringStore.setActive(tx, active, row.retired, sealedHashKey);
      }
      keyring.sealWith(active);
      await keyringStore.heartbeat(tx, this.holder, keyring.ids, active);
      return hashKey;
    });
    this.o.logger.info({ secrets_keys: this.o.keyring.ids, sealing_key: this.o.keyring.sealingKeyId }, 'secrets keyring: joined');
    return this.hashKey;
  }

  /** Ticks until stop(). */
  start(): void {
    const loop = async () => {
      let more = false;
      try {
        more = await this.tick();
      } catch (err) {
        this.o.logger.warn({ err: (err as Error).message }, 'secrets keyring: tick failed');
      }
      if (!this.stopped) this.timer = setTimeout(() => (this.running = loop()), more ? 10 : this.tickMs);
    };
    this.timer = setTimeout(() => (this.running = loop()), this.tickMs);
  }

  /**
   * One round: report this replica and seal with the active key; with the
   * lease, activate the newest key when every registry has it and
   * re-encrypt for up to workSliceMs. True when re-encryption has more to do.
   */
  async tick(): Promise<boolean> {
    const { keyring } = this.o;
    const live = this.o.liveDb ?? this.o.db;
    const row = await keyringStore.row(live);
    const active = row.activeKeyId ?? LEGACY_KEY_ID;
    this.lacking = keyring.has(active) ? undefined : active;
    if (active !== keyring.sealingKeyId) {
      if (keyring.has(active)) {
        keyring.sealWith(active);
        this.doneAt = 0;
        this.o.logger.info({ sealing_key: active }, 'secrets keyring: sealing with the active key');
      } else {
        this.once(`lacks ${active}`, () => this.o.logger.error({ active_key: active, secrets_keys: keyring.ids }, 'secrets keyring: the active key is not configured here (not ready); restart this registry with it'));
      }
    }
    await keyringStore.heartbeat(live, this.holder, keyring.ids, keyring.sealingKeyId);
    const had = this.leased;
    this.leased = await keyringStore.lease(live, this.holder, this.leaseMs);
    if (this.leased && !had) this.o.logger.info('secrets keyring: lease taken');
    if (!this.leased) return false;
    if (await this.maybeActivate(row)) this.doneAt = 0;
    if (this.doneAt > 0 && Date.now() - this.doneAt < RECHECK_DONE_MS) return false;
    const until = Date.now() + this.workSliceMs;
    for (let i = 0; i < 10_000 && !this.stopped && Date.now() < until; i++) {
      const step = await this.step();
      if (step.kind !== 'progress') return false;
    }
    return true;
  }

  /** One re-encryption batch (reencrypt.ts), if this replica holds the lease. */
  async step(): Promise<StepResult> {
    const { db, keyring } = this.o;
    const step = await reencryptStep({ db, keyring, holder: this.holder, batch: this.o.batch, hostSyncHashKey: this.hostSyncHashKey, holderExpiryMs: this.expiryMs });
    if (step.kind === 'done') {
      this.doneAt = Date.now();
      if (step.newlyDone) this.o.logger.info({ sealing_key: keyring.sealingKeyId }, 'secrets keyring: every stored secret is sealed under the active key');
    }
    return step;
  }

  /** The newest key seals once every registry heard from has it (never a key that sealed before the active one). */
  private async maybeActivate(seen: KeyringRow): Promise<boolean> {
    const { keyring } = this.o;
    const candidate = keyring.newest;
    const current = seen.activeKeyId ?? LEGACY_KEY_ID;
    if (candidate === current) return false;
    if (seen.retired.includes(candidate)) {
      this.once(`retired ${candidate}`, () => this.o.logger.warn({ newest: candidate, active_key: current }, 'secrets keyring: the first key configured sealed before the active one; list the newest key first'));
      return false;
    }
    const activated = await (this.o.liveDb ?? this.o.db).transaction(async (tx) => {
      const row = await keyringStore.row(tx, true);
      if (row.leaseHolder !== this.holder || (row.activeKeyId ?? LEGACY_KEY_ID) !== current) return false;
      const lacking = (await keyringStore.holders(tx, this.expiryMs)).filter((h) => !h.keyIds.includes(candidate));
      if (lacking.length > 0) return false;
      const hashKey = row.hostSyncHashKey ?? keyring.seal(this.hostSyncHashKey.toString('base64'), HASH_KEY_AAD, candidate);
      await keyringStore.setActive(tx, candidate, [...row.retired.filter((id) => id !== current), current], hashKey);
      await keyringStore.heartbeat(tx, this.holder, keyring.ids, candidate);
      return true;
    });
    if (!activated) return false;
    keyring.sealWith(candidate);
    this.o.logger.info({ sealing_key: candidate, previous_key: current }, 'secrets keyring: every registry has the newest key; it seals from now on, re-encrypting what the others sealed');
    return true;
  }

  async status(): Promise<SecretsKeyStatus> {
    return secretsKeyStatus(this.o.db, this.o.keyring, this.expiryMs);
  }

  /** Stops ticking, then removes this replica from the holders and gives up the lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await keyringStore.leave(this.o.liveDb ?? this.o.db, this.holder).catch((err: unknown) => this.o.logger.warn({ err: (err as Error).message }, 'secrets keyring: could not leave'));
  }

  /** A configured key id that sealed stored values must open one of them: the same id with another key on another registry would fail requests. */
  private async checkSameKeys(tx: Queryable, counts: Record<string, number>): Promise<void> {
    for (const id of this.o.keyring.ids.filter((k) => (counts[k] ?? 0) > 0)) {
      for (const t of SEALED_TABLES) {
        const c = t.columns[0]!;
        const [r] = await tx.query(`SELECT ${[t.key, ...t.extra, c.column].join(', ')} FROM ${t.table} WHERE starts_with(${c.column}, $1) LIMIT 1`, [sealedPrefix(id)]);
        if (!r) continue;
        try {
          this.o.keyring.open(String(r[c.column]), c.aad(r));
        } catch {
          throw new ConfigError(this.o.variable, `has a key ${id} that does not open the secrets stored under ${id}: it differs from the key the other registries have under that id`);
        }
        break;
      }
    }
  }

  private openHashKey(row: KeyringRow): Buffer {
    const { keyring, variable } = this.o;
    if (row.hostSyncHashKey !== null) {
      try {
        return Buffer.from(keyring.open(row.hostSyncHashKey, HASH_KEY_AAD), 'base64');
      } catch {
        throw new ConfigError(variable, `has a key ${sealedKeyId(row.hostSyncHashKey) ?? '?'} that does not open the stored host-sync hash key: it differs from the key the other registries have under that id`);
      }
    }
    const k0 = keyring.key(LEGACY_KEY_ID);
    // No k0 and no stored hash key: nothing was hashed yet (join refused otherwise), so a fresh key.
    return k0 ? legacyHostSyncHashKey(k0) : randomBytes(32);
  }

  private once(what: string, say: () => void): void {
    if (this.said.has(what)) return;
    this.said.add(what);
    say();
  }
}
