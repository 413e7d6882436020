import { clockedLru, RelayError, systemClock, type Clock } from '@service-relay/core';
import type { LRUCache } from 'lru-cache';
import { HistoryJournal } from './history-journal';
import { epochLine, messageLine, type JournalRecord } from './journal-records';
import { compareMessageIds, parseMessageId, type ParsedId } from './message-id';
import { makeMessage, type ChannelRef, type Message, type MessageListener } from './message';
import type { HistoryPage, HistoryQuery, MessageBus, PublishOptions } from './message-bus';
import { judgeRecovery, newEpoch, NO_EPOCH } from './recovery';

export interface RetentionOptions {
  /** Messages kept per channel (at least). */
  maxMessages: number;
  /** A channel idle this long loses its history. */
  ttlS: number;
}

export interface MemoryBusOptions {
  clock?: Clock;
  /** Journal directory (HISTORY_DIR); without one, history lasts as long as the process. */
  dir?: string;
  /** How long an idempotency key is remembered (IDEMPOTENCY_WINDOW_S). */
  idempotencyWindowS?: number;
  /** Journal bytes appended beyond twice the last snapshot that trigger a compaction. */
  compactAfterBytes?: number;
}

interface ChannelLog {
  ref: ChannelRef;
  /** Acknowledged messages only: a message joins once its journal write completed. */
  messages: Message[];
  /** The last id assigned (maybe not acknowledged yet). */
  lastMs: number;
  lastSeq: number;
  expiresAt: number;
  epoch: string;
  since: ParsedId;
  maxDeleted: ParsedId;
  /** The publishing tenant's history limit at its last publish (#30); undefined: the store's own. */
  maxMessages?: number;
}

interface IdempotentEntry {
  stored: Promise<Message>;
  message?: Message;
}

const SWEEP_EVERY_MS = 60_000;
/** Idempotency keys remembered at most; past this the least recently used go first. */
const MAX_IDEMPOTENCY_KEYS = 100_000;
const ZERO: ParsedId = Object.freeze({ ms: 0, seq: 0 });

/**
 * In-process channels: valid when every realtime instance is this one
 * process. With a directory, history survives a restart through the journal;
 * after an unclean stop no channel can be proven complete (writes are not
 * fsynced one by one), so each restored channel starts a new epoch.
 */
export class MemoryMessageBus implements MessageBus {
  private readonly logs = new Map<string, ChannelLog>();
  private readonly listeners = new Map<string, Set<MessageListener>>();
  private readonly idempotent: LRUCache<string, IdempotentEntry>;
  private readonly clock: Clock;
  private readonly windowMs: number;
  private readonly journal: HistoryJournal | undefined;
  private lastSweep: number;

  constructor(
    private readonly retention: RetentionOptions,
    opts: MemoryBusOptions = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.windowMs = (opts.idempotencyWindowS ?? 600) * 1000;
    this.idempotent = clockedLru(MAX_IDEMPOTENCY_KEYS, this.clock, { ttl: this.windowMs });
    this.lastSweep = this.clock.now();
    if (opts.dir !== undefined) {
      const { records, complete } = HistoryJournal.read(opts.dir);
      this.restore(records, complete);
      this.journal = new HistoryJournal(opts.dir, this.snapshot(), opts.compactAfterBytes ?? 8 * 1024 * 1024);
    }
  }

  publish(ref: ChannelRef, userId: string, dataJson: string, opts: PublishOptions = {}): Promise<Message> {
    const key = keyOf(ref);
    const idemKey = opts.idempotencyKey === undefined ? undefined : `${key}/${opts.idempotencyKey}`;
    const prior = idemKey === undefined ? undefined : this.idempotent.get(idemKey);
    if (prior) return prior.stored;
    if (this.journal && !this.journal.healthy) return Promise.reject(new RelayError('unavailable', 'history journal unavailable'));
    const now = this.clock.now();
    this.sweep(now);
    let log = this.live(key, now);
    const fresh = !log;
    log ??= this.open(ref, key);
    // Same rule as Redis XADD *: the id never goes backwards, even if the clock does.
    const ms = Math.max(now, log.lastMs);
    const seq = ms === log.lastMs ? log.lastSeq + 1 : 0;
    log.lastMs = ms;
    log.lastSeq = seq;
    log.expiresAt = now + (opts.retention?.ttlS ?? this.retention.ttlS) * 1000;
    if (opts.retention) log.maxMessages = opts.retention.maxMessages;
    if (fresh) log.since = { ms, seq };
    const message = makeMessage(`${ms}-${seq}`, ref.channel, userId, dataJson);
    const stored = this.store(log, message, fresh, opts.idempotencyKey);
    if (idemKey !== undefined) {
      const entry: IdempotentEntry = { stored };
      this.idempotent.set(idemKey, entry);
      stored.then(
        (m) => (entry.message = m),
        () => this.idempotent.get(idemKey) === entry && this.idempotent.delete(idemKey),
      );
    }
    return stored;
  }

  async history(ref: ChannelRef, query: HistoryQuery): Promise<HistoryPage> {
    const now = this.clock.now();
    const log = this.live(keyOf(ref), now);
    const page: HistoryPage = { messages: slice(log?.messages ?? [], query), epoch: log?.epoch ?? NO_EPOCH };
    if (query.after !== undefined) {
      page.recovery = judgeRecovery({
        after: parseMessageId(query.after)!,
        clientEpoch: query.epoch,
        stream: log && { epoch: log.epoch, since: log.since, maxDeleted: log.maxDeleted },
        nowMs: now,
        ttlMs: (query.ttlS ?? this.retention.ttlS) * 1000,
      });
    }
    return page;
  }

  async epoch(ref: ChannelRef): Promise<string> {
    return this.live(keyOf(ref), this.clock.now())?.epoch ?? NO_EPOCH;
  }

  async subscribe(ref: ChannelRef, listener: MessageListener): Promise<() => void> {
    const key = keyOf(ref);
    let set = this.listeners.get(key);
    if (!set) {
      set = new Set();
      this.listeners.set(key, set);
    }
    set.add(listener);
    return () => {
      const current = this.listeners.get(key);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.listeners.delete(key);
    };
  }

  /** Drops the tenant's channels and idempotency keys; with a journal, rewrites it without them before resolving. */
  async purgeTenant(tenantId: string): Promise<number> {
    const head = `${tenantId}/`;
    let channels = 0;
    for (const key of [...this.logs.keys()]) {
      if (!key.startsWith(head)) continue;
      this.logs.delete(key);
      channels++;
    }
    for (const key of [...this.idempotent.keys()]) if (key.startsWith(head)) this.idempotent.delete(key);
    // The journal still holds its lines: a compaction writes what is retained now (without them) and renames it over.
    await this.journal?.compact(() => this.snapshot());
    return channels;
  }

  async ready(): Promise<boolean> {
    return this.journal?.healthy ?? true;
  }

  async close(): Promise<void> {
    this.listeners.clear();
    await this.journal?.close();
  }

  private open(ref: ChannelRef, key: string): ChannelLog {
    const log: ChannelLog = { ref, messages: [], lastMs: 0, lastSeq: -1, expiresAt: 0, epoch: newEpoch(), since: ZERO, maxDeleted: ZERO };
    this.logs.set(key, log);
    return log;
  }

  /** Acknowledged (and delivered) once its journal line is written, in id order per channel. */
  private store(log: ChannelLog, m: Message, fresh: boolean, idemKey: string | undefined): Promise<Message> {
    const journal = this.journal;
    if (!journal) {
      this.commit(log, m);
      return Promise.resolve(m);
    }
    const { tenantId, channel } = log.ref;
    const head = fresh ? epochLine(tenantId, channel, log.epoch, `${log.since.ms}-${log.since.seq}`, '0-0') : '';
    return new Promise((resolve, reject) => {
      journal.append(head + messageLine(tenantId, channel, m.id, m.userId, m.dataJson, idemKey), (err) => {
        if (err) return reject(new RelayError('unavailable', 'history journal write failed', { cause: err }));
        this.commit(log, m);
        resolve(m);
        if (journal.needsCompaction) journal.compact(() => this.snapshot()).catch(() => {});
      });
    });
  }

  private commit(log: ChannelLog, m: Message): void {
    log.messages.push(m);
    this.trim(log);
    for (const listener of this.listeners.get(keyOf(log.ref)) ?? []) {
      try {
        listener(m);
      } catch {
        // One failing listener must not starve the others.
      }
    }
  }

  /** In batches, like MAXLEN ~: at least maxMessages stay. */
  private trim(log: ChannelLog): void {
    const max = log.maxMessages ?? this.retention.maxMessages;
    if (log.messages.length <= max + Math.max(1, Math.floor(max / 10))) return;
    const cut = log.messages.splice(0, log.messages.length - max);
    const last = cut[cut.length - 1]!;
    log.maxDeleted = { ms: last.ms, seq: last.seq };
  }

  /** Rebuilds the channels a journal describes. */
  private restore(records: JournalRecord[], complete: boolean): void {
    const now = this.clock.now();
    const ttlMs = this.retention.ttlS * 1000;
    for (const rec of records) {
      if (rec.r === 'end') continue;
      const ref = { tenantId: rec.t, channel: rec.c };
      const key = keyOf(ref);
      if (rec.r === 'e') {
        const log = this.open(ref, key);
        log.epoch = rec.e;
        log.since = parseMessageId(rec.s)!;
        log.maxDeleted = parseMessageId(rec.x)!;
        continue;
      }
      // A message without its epoch line: its channel's start is unknown.
      const log = this.logs.get(key) ?? this.open(ref, key);
      const m = makeMessage(rec.i, rec.c, rec.u, rec.dataJson);
      if (log.messages.length > 0 && !isAfterId(m, log)) continue;
      log.messages.push(m);
      log.lastMs = m.ms;
      log.lastSeq = m.seq;
      log.expiresAt = m.ms + ttlMs;
      this.trim(log);
      if (rec.k !== undefined && now - m.ms < this.windowMs) {
        this.idempotent.set(`${key}/${rec.k}`, { stored: Promise.resolve(m), message: m }, { ttl: this.windowMs - (now - m.ms) });
      }
    }
    for (const [key, log] of this.logs) {
      if (log.expiresAt <= now || log.messages.length === 0) this.logs.delete(key);
      // Without a clean shutdown, an acknowledged message may be missing after the last one restored.
      else if (!complete) {
        log.epoch = newEpoch();
        log.since = { ms: log.lastMs, seq: log.lastSeq + 1 };
      }
    }
  }

  /** Every retained message, as the journal's compacted form. */
  private snapshot(): string {
    const keys = new Map<Message, string>();
    for (const [k, entry] of this.idempotent.entries()) if (entry.message) keys.set(entry.message, k.slice(k.lastIndexOf('/') + 1));
    const now = this.clock.now();
    const out: string[] = [];
    for (const log of this.logs.values()) {
      if (log.expiresAt <= now || log.messages.length === 0) continue;
      const { tenantId: t, channel: c } = log.ref;
      out.push(epochLine(t, c, log.epoch, `${log.since.ms}-${log.since.seq}`, `${log.maxDeleted.ms}-${log.maxDeleted.seq}`));
      for (const m of log.messages) out.push(messageLine(t, c, m.id, m.userId, m.dataJson, keys.get(m)));
    }
    return out.join('');
  }

  private live(key: string, now: number): ChannelLog | undefined {
    const log = this.logs.get(key);
    if (log && log.expiresAt <= now) {
      this.logs.delete(key);
      return undefined;
    }
    return log;
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    for (const [key, log] of this.logs) if (log.expiresAt <= now) this.logs.delete(key);
  }
}

function slice(messages: Message[], query: HistoryQuery): Message[] {
  if (query.after === undefined) return messages.slice(Math.max(0, messages.length - query.limit));
  const after = query.after;
  // Binary search for the first id greater than `after`.
  let lo = 0;
  let hi = messages.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareMessageIds(messages[mid]!.id, after) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return messages.slice(lo, lo + query.limit);
}

function isAfterId(m: Message, log: ChannelLog): boolean {
  return m.ms > log.lastMs || (m.ms === log.lastMs && m.seq > log.lastSeq);
}

function keyOf(ref: ChannelRef): string {
  // Channel names cannot contain '/', so this key is unambiguous.
  return `${ref.tenantId}/${ref.channel}`;
}
