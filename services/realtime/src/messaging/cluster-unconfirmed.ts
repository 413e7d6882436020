import { slotOwner, type Logger, type Redis } from '@service-relay/core';
import { newEpoch } from './recovery';
import { READ_SCRIPT } from './redis-scripts';

/** Channels with unconfirmed publishes one instance remembers; beyond it, such publishes answer unavailable. */
const MAX_UNCONFIRMED = 10_000;
/** How often the remembered channels are checked for a failover of their slot. */
const SWEEP_MS = 250;

interface ReadScript {
  relayBump(stream: string, meta: string, after: string, limit: number, gen: string, adopt: string, epoch: string): Promise<unknown>;
}

/**
 * Redis Cluster only: channels with a publish acknowledged that no replica
 * confirmed (WAIT timed out), with the master (`host:port`) that holds it.
 * A Cluster keeps no history generation (one marker cannot speak for every
 * node), so the instance that acknowledged them announces the possible
 * loss: once the channel's slot is served by another master (a failover
 * promoted the replica), it starts a new epoch there, and clients resuming
 * from before are told `recovered: false`. A later confirmed write to the
 * same master forgets its channels (WAIT counts the master's replication
 * offset, so the replica then holds everything before it).
 */
export class ClusterUnconfirmed {
  private readonly on = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly cmd: Redis & ReadScript;

  constructor(cmd: Redis, private readonly logger: Logger) {
    this.cmd = cmd as Redis & ReadScript;
    this.cmd.defineCommand('relayBump', { numberOfKeys: 2, lua: READ_SCRIPT });
  }

  /** A publish on `stream` was acknowledged without a replica's confirmation. Throws when too many channels are remembered. */
  mark(stream: string): void {
    const owner = slotOwner(this.cmd, stream);
    if (!owner) return;
    if (this.on.size >= MAX_UNCONFIRMED && !this.on.has(stream)) {
      // Not acknowledged: the client retries with its Idempotency-Key once a replica confirms again.
      throw new Error(`${MAX_UNCONFIRMED} channels hold publishes no replica confirmed`);
    }
    this.on.set(stream, owner.node);
    this.timer ??= setInterval(() => void this.sweep(), SWEEP_MS).unref();
  }

  /** A replica confirmed a publish on `stream`: every channel remembered on its master is confirmed too. */
  confirmed(stream: string): void {
    if (this.on.size === 0) return;
    const node = slotOwner(this.cmd, stream)?.node;
    for (const [k, n] of this.on) if (n === node) this.on.delete(k);
  }

  /** Whether `stream` is remembered on a master that no longer serves its slot (as ioredis knows the slot map now). */
  moved(stream: string): boolean {
    const was = this.on.get(stream);
    if (was === undefined) return false;
    const now = slotOwner(this.cmd, stream)?.node;
    return now !== undefined && now !== was;
  }

  /** Before this instance touches a channel, and every SWEEP_MS: a new epoch for a channel whose unconfirmed publishes stayed on a master that no longer serves its slot. */
  async settle(stream: string): Promise<void> {
    if (!this.moved(stream)) return;
    const was = this.on.get(stream)!;
    // A generation the channel has not seen (Cluster channels carry ''): the read script starts a new epoch after the last retained entry.
    await this.cmd.relayBump(stream, `${stream}/meta`, '', 0, `1.${newEpoch()}`, '0', newEpoch());
    if (this.on.get(stream) === was) this.on.delete(stream);
    this.logger.warn({ from: was, to: slotOwner(this.cmd, stream)?.node }, 'Redis Cluster failover: a channel with publishes no replica confirmed starts a new epoch (clients resuming are told history_lost)');
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async sweep(): Promise<void> {
    // ioredis re-reads the slot map only when a command meets a moved or dead node: ask it now, so a
    // failover is seen without waiting for this instance's next command to the channel's slot.
    await new Promise<void>((resolve) => (this.cmd as unknown as { refreshSlotsCache(cb: () => void): void }).refreshSlotsCache(() => resolve()));
    for (const stream of [...this.on.keys()]) await this.settle(stream).catch(() => {});
    if (this.on.size === 0) this.close();
  }
}
