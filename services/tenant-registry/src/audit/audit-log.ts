import { systemClock, type Clock, type Logger } from '@service-relay/core';
import { UNAUTHENTICATED } from './admin-tokens';
import type { AuditEntry, AuditFilter, AuditPage, AuditStore } from './audit-store';
import { FailureSampler } from './failure-sampler';

export type AuditWriteResult = 'written' | 'failed' | 'suppressed';

export interface AuditLogOptions {
  /** Failed authentications written per minute (the rest are counted on the next one written). */
  unauthenticatedPerMinute: number;
  /** How long an answer waits for its row before going out anyway (the write goes on, and a failure is still logged). */
  writeTimeoutMs?: number;
  clock?: Clock;
  onWrite?: (result: AuditWriteResult) => void;
}

const DEFAULT_WRITE_TIMEOUT_MS = 2000;

/**
 * Records every admin call. A row is written before the call is answered,
 * but recording never changes an answer: a row that cannot be written (the
 * database is down) is logged and the call answers as it would have.
 */
export class AuditLog {
  private readonly sampler: FailureSampler;
  private readonly writeTimeoutMs: number;
  private readonly onWrite: (result: AuditWriteResult) => void;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly store: Pick<AuditStore, 'insert' | 'list' | 'prune'>,
    private readonly logger: Logger,
    opts: AuditLogOptions,
  ) {
    this.sampler = new FailureSampler(opts.unauthenticatedPerMinute, 60_000, opts.clock ?? systemClock);
    this.writeTimeoutMs = opts.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
    this.onWrite = opts.onWrite ?? (() => {});
  }

  /** Never rejects. Resolves once the row is written, failed (logged), or after the write timeout. */
  async record(entry: Omit<AuditEntry, 'suppressed'>): Promise<void> {
    let suppressed = 0;
    if (entry.actor === UNAUTHENTICATED) {
      const verdict = this.sampler.take();
      if (!verdict.record) {
        this.onWrite('suppressed');
        if (verdict.firstInWindow) this.logger.warn({ req_id: entry.requestId }, 'failed admin authentications over the audit limit this minute: counted, not written, until the next minute');
        return;
      }
      suppressed = verdict.suppressed;
    }
    const write = this.store.insert({ ...entry, suppressed }).then(
      () => this.onWrite('written'),
      (err: unknown) => {
        this.onWrite('failed');
        this.logger.error(
          { err: (err as Error).message, req_id: entry.requestId, actor: entry.actor, action: entry.action, tenant_id: entry.tenantId, status: entry.status, error: entry.error },
          'admin call not recorded in the audit log',
        );
      },
    );
    this.inFlight.add(write);
    void write.finally(() => this.inFlight.delete(write));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), this.writeTimeoutMs);
    });
    try {
      if ((await Promise.race([write, late])) === 'late') {
        this.logger.warn({ req_id: entry.requestId, action: entry.action, waited_ms: this.writeTimeoutMs }, 'audit row not written in time; answering the admin call anyway');
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Newest first; waits for this instance's writes still in flight, so a caller reads its own calls. */
  async list(limit: number, beforeId?: number, filter?: AuditFilter): Promise<AuditPage> {
    await Promise.all([...this.inFlight]);
    return this.store.list(limit, beforeId, filter);
  }

  prune(keepMs: number): Promise<number> {
    return this.store.prune(keepMs);
  }
}
