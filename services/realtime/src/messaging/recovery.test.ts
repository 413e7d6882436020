import { describe, expect, it } from 'vitest';
import { judgeRecovery, NO_EPOCH, type EpochState, type Recovery } from './recovery';

const TTL = 60_000;
const NOW = 1_000_000;
const id = (ms: number, seq = 0) => ({ ms, seq });
const stream = (over: Partial<EpochState> = {}): EpochState => ({ epoch: 'E1', since: id(900_000), maxDeleted: id(0), ...over });
const ok: Recovery = { recovered: true };
const lost: Recovery = { recovered: false, reason: 'history_lost' };
const tooOld: Recovery = { recovered: false, reason: 'too_old' };

describe('judgeRecovery', () => {
  it.each<[string, { after: [number, number]; epoch?: string; stream?: EpochState }, Recovery]>([
    ['inside the epoch, nothing trimmed', { after: [950_000, 0], stream: stream() }, ok],
    ['inside the epoch, the client names it', { after: [950_000, 0], epoch: 'E1', stream: stream() }, ok],
    ['an empty epoch sent back counts as none', { after: [950_000, 0], epoch: NO_EPOCH, stream: stream() }, ok],
    ['at the epoch start itself', { after: [900_000, 0], stream: stream() }, ok],
    ['the client names another epoch', { after: [950_000, 0], epoch: 'E0', stream: stream() }, lost],
    ['the epoch began after `after`', { after: [899_999, 5], stream: stream() }, lost],
    ['the epoch began a TTL or more after `after`', { after: [840_000, 0], stream: stream() }, tooOld],
    ['another epoch, a TTL or more after `after`', { after: [840_000, 0], epoch: 'E0', stream: stream() }, tooOld],
    ['the client names this epoch but began before it', { after: [850_000, 0], epoch: 'E1', stream: stream() }, ok],
    ['a message after `after` was removed', { after: [950_000, 0], stream: stream({ maxDeleted: id(950_000, 1) }) }, tooOld],
    ['the removed message is `after` itself', { after: [950_000, 1], stream: stream({ maxDeleted: id(950_000, 1) }) }, ok],
    ['trimmed past `after`', { after: [950_000, 0], stream: stream({ trimmedTo: id(960_000) }) }, tooOld],
    ['trimmed, but not up to `after`', { after: [960_000, 0], stream: stream({ trimmedTo: id(960_000) }) }, ok],
    ['from the start of an untrimmed epoch', { after: [0, 0], stream: stream() }, ok],
    ['from the start of a trimmed epoch', { after: [0, 0], stream: stream({ trimmedTo: id(960_000) }) }, tooOld],
    ['a stream from before epochs', { after: [10, 0], epoch: 'E9', stream: stream({ epoch: NO_EPOCH, since: id(0) }) }, ok],
    ['no stream, from the start', { after: [0, 0] }, ok],
    ['no stream, `after` within the TTL', { after: [NOW - TTL + 1, 0] }, lost],
    ['no stream, `after` a TTL ago', { after: [NOW - TTL, 0] }, tooOld],
    ['no stream, from the start of an epoch the client saw', { after: [0, 0], epoch: 'E1' }, tooOld],
  ])('%s', (_, c, expected) => {
    const after = { ms: c.after[0], seq: c.after[1] };
    expect(judgeRecovery({ after, clientEpoch: c.epoch, stream: c.stream, nowMs: NOW, ttlMs: TTL })).toEqual(expected);
  });
});
