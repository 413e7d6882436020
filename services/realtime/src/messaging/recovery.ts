import { randomUUID } from 'node:crypto';
import type { ParsedId } from './message-id';

/**
 * Every channel stream has an epoch: an opaque id that changes whenever the
 * store lost the stream (restart without persistence, idle expiry, a journal
 * that cannot be trusted). A client's position (`after`) only means something
 * within the epoch it was read in.
 */
export type LossReason = 'history_lost' | 'too_old';
export type Recovery = { recovered: true } | { recovered: false; reason: LossReason };

/** The epoch of a channel the store holds no stream for; a client sending it back is the same as sending none. */
export const NO_EPOCH = '';

/** A wire-safe epoch grammar (what a client may send back). */
export const EPOCH_SHAPE = /^[A-Za-z0-9_-]{0,64}$/;

export function newEpoch(): string {
  return randomUUID().replaceAll('-', '');
}

/** What the store knows about a stream that exists. */
export interface EpochState {
  /** NO_EPOCH for a stream from before epochs existed (its start is unknown). */
  epoch: string;
  /** The epoch's first position: an id before it belongs to an earlier history that is gone. */
  since: ParsedId;
  /** The highest id removed from the stream, when the store knows it exactly (0-0 when none). */
  maxDeleted: ParsedId;
  /**
   * When the store only knows that older entries were trimmed: the first id
   * still retained. A position before it may have missed a trimmed message
   * (or, exactly at the boundary, none: the answer errs on the side of loss).
   */
  trimmedTo?: ParsedId | undefined;
}

export interface RecoveryInput {
  after: ParsedId;
  clientEpoch: string | undefined;
  /** Undefined when the store has no stream (never published, expired, or lost). */
  stream: EpochState | undefined;
  /** On the clock that made the ids. */
  nowMs: number;
  ttlMs: number;
}

const RECOVERED: Recovery = Object.freeze({ recovered: true });
const HISTORY_LOST: Recovery = Object.freeze({ recovered: false, reason: 'history_lost' });
const TOO_OLD: Recovery = Object.freeze({ recovered: false, reason: 'too_old' });

/**
 * Whether a client at `after` can get everything published since. `0-0`
 * means "from the start": nothing was seen, so only trimming (or an epoch
 * the client names) can make it incomplete. A gap the idle TTL explains is
 * `too_old`; one it cannot explain is `history_lost`.
 */
export function judgeRecovery(input: RecoveryInput): Recovery {
  const { after, stream, nowMs, ttlMs } = input;
  const fromStart = after.ms === 0 && after.seq === 0;
  const known = input.clientEpoch === NO_EPOCH ? undefined : input.clientEpoch;
  if (!stream) {
    if (fromStart && known === undefined) return RECOVERED;
    // A message at `after` keeps its stream alive for at least the TTL.
    return nowMs - after.ms >= ttlMs ? TOO_OLD : HISTORY_LOST;
  }
  const epochBroken =
    known !== undefined && stream.epoch !== NO_EPOCH ? known !== stream.epoch : !fromStart && before(after, stream.since);
  if (epochBroken) return stream.since.ms - after.ms >= ttlMs ? TOO_OLD : HISTORY_LOST;
  if (before(after, stream.maxDeleted) || (stream.trimmedTo && before(after, stream.trimmedTo))) return TOO_OLD;
  return RECOVERED;
}

function before(a: ParsedId, b: ParsedId): boolean {
  return a.ms < b.ms || (a.ms === b.ms && a.seq < b.seq);
}
