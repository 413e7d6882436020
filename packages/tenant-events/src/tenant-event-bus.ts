/** Called with the feed sequence a notice announced; undefined means "check now" (the bus may have missed notices). */
export type NoticeHandler = (seq: number | undefined) => void;

/**
 * The wake-up channel of the tenant feed. The registry announces every
 * committed change's sequence here so that consumers pull it at once instead
 * of at their next poll. It carries no state and nothing depends on it
 * arriving: a lost, late or duplicated notice only changes how soon a
 * consumer pulls (see TenantFeed), never what it trusts.
 */
export interface TenantEventBus {
  /** Announces `seq`. Resolves when sent; never waits on consumers. Rejects when the bus cannot send. */
  notify(seq: number): Promise<void>;
  onNotice(handler: NoticeHandler): () => void;
  /** True while notices can be received. */
  isConnected(): boolean;
  ready(): Promise<boolean>;
  close(): Promise<void>;
}
