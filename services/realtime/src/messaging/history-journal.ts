import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, write, writeFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { END_LINE, parseLine, type JournalRecord } from './journal-records';

const JOURNAL = 'journal.log';
const LOCK = 'journal.lock';

export interface JournalContents {
  records: JournalRecord[];
  /** The last shutdown was clean and every line is intact: nothing acknowledged can be missing. */
  complete: boolean;
}

type Done = (err?: Error) => void;

/**
 * The embedded store's append-only journal (one per process, in one
 * directory). Appends are grouped: while one write is in flight the next
 * ones queue and leave together, and each is acknowledged by its write's
 * callback. Compaction replaces the file with a snapshot of what is retained
 * (written to a temporary file, fsynced, renamed over); appends wait for it.
 */
export class HistoryJournal {
  private fd: number;
  private queue: { text: string; done: Done }[] = [];
  private inFlight = false;
  private writeScheduled = false;
  private held = false;
  private idle: (() => void)[] = [];
  private failed: Error | undefined;
  private closing = false;
  private closed = false;
  private bytesSinceCompaction = 0;
  private snapshotBytes: number;
  private compacting: Promise<void> | undefined;

  /** Reads what an earlier process left; takes the directory's lock. */
  static read(dir: string): JournalContents {
    mkdirSync(dir, { recursive: true });
    lock(dir);
    let text: string;
    try {
      text = readFileSync(join(dir, JOURNAL), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], complete: false };
      throw err;
    }
    const lines = text.split('\n');
    // A complete file ends with a newline; anything after the last one is a torn write.
    let intact = lines.pop() === '';
    const records: JournalRecord[] = [];
    for (const line of lines) {
      const rec = parseLine(line);
      if (rec) records.push(rec);
      else intact = false;
    }
    return { records, complete: intact && records[records.length - 1]?.r === 'end' };
  }

  /** Starts a fresh journal holding `snapshot` (the state just restored), replacing the old file. */
  constructor(
    private readonly dir: string,
    snapshot: string,
    private readonly compactAfterBytes: number,
  ) {
    const tmp = join(dir, `${JOURNAL}.tmp`);
    writeFileSync(tmp, snapshot);
    const tfd = openSync(tmp, 'r+');
    fsyncSync(tfd);
    closeSync(tfd);
    renameSync(tmp, join(dir, JOURNAL));
    syncDir(dir);
    this.snapshotBytes = snapshot.length;
    this.fd = openSync(join(dir, JOURNAL), 'a');
  }

  /** False once a write failed: later appends fail too. */
  get healthy(): boolean {
    return !this.failed && !this.closing;
  }

  /** Enough was appended since the last snapshot that rewriting would shrink the file. */
  get needsCompaction(): boolean {
    return !this.compacting && this.bytesSinceCompaction > this.compactAfterBytes + 2 * this.snapshotBytes;
  }

  append(text: string, done: Done): void {
    if (this.failed || this.closing) {
      const err = this.failed ?? new Error('history journal closed');
      process.nextTick(done, err);
      return;
    }
    this.bytesSinceCompaction += text.length;
    this.queue.push({ text, done });
    this.pump();
  }

  /**
   * Rewrites the journal as `snapshot()`, taken once every acknowledged
   * append has landed (so it includes them all). A crash meanwhile leaves
   * the old file, which is complete.
   */
  compact(snapshot: () => string): Promise<void> {
    this.compacting ??= this.runCompaction(snapshot).finally(() => {
      this.compacting = undefined;
    });
    return this.compacting;
  }

  /** Flushes, marks the shutdown clean and releases the directory. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    await this.compacting?.catch(() => {});
    await this.settled();
    this.closed = true;
    try {
      if (!this.failed) {
        writeFileSync(this.fd, END_LINE);
        fsyncSync(this.fd);
      }
    } finally {
      closeSync(this.fd);
      unlock(this.dir);
    }
  }

  private async runCompaction(snapshot: () => string): Promise<void> {
    this.held = true;
    try {
      await this.settled();
      if (this.failed || this.closed) return;
      const text = snapshot();
      const tmp = join(this.dir, `${JOURNAL}.tmp`);
      const handle = await open(tmp, 'w');
      try {
        await handle.writeFile(text);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(tmp, join(this.dir, JOURNAL));
      syncDir(this.dir);
      closeSync(this.fd);
      this.fd = openSync(join(this.dir, JOURNAL), 'a');
      this.snapshotBytes = text.length;
      this.bytesSinceCompaction = 0;
    } finally {
      this.held = false;
      this.pump();
    }
  }

  /** Resolves when no write is in flight (queued appends may remain while held). */
  private settled(): Promise<void> {
    if (!this.inFlight && (this.held || this.queue.length === 0)) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /**
   * Starts the next write at the end of this turn of the event loop
   * (setImmediate), not at the first append: the publishes of one socket
   * read reach append one by one through their own promise chains, and a
   * write started at the first left it alone with the rest in the next
   * group. Each group's messages are acknowledged, and fanned out, together,
   * so a lone first message cost a batch frame and a socket write per
   * subscriber of its own: the fan-out through `npm start` measured 13-15
   * messages per batch frame against 25-29 on Redis, and nearly twice the
   * CPU per delivery (bench/README.md "The embedded journal's groups").
   */
  private pump(): void {
    if (this.inFlight || this.held || this.closed || this.queue.length === 0) return this.wake();
    if (this.writeScheduled) return;
    this.writeScheduled = true;
    setImmediate(this.writeQueued);
  }

  private readonly writeQueued = (): void => {
    this.writeScheduled = false;
    if (this.inFlight || this.held || this.closed || this.queue.length === 0) return this.wake();
    const batch = this.queue.splice(0);
    this.inFlight = true;
    writeAll(this.fd, Buffer.from(batch.length === 1 ? batch[0]!.text : batch.map((b) => b.text).join('')), (err) => {
      this.inFlight = false;
      if (err) this.failed = err;
      for (const b of batch) b.done(err ?? undefined);
      this.pump();
    });
  };

  private wake(): void {
    if (this.inFlight || (!this.held && this.queue.length > 0)) return;
    for (const resolve of this.idle.splice(0)) resolve();
  }
}

function writeAll(fd: number, buf: Buffer, done: (err: Error | null) => void): void {
  write(fd, buf, 0, buf.length, null, (err, n) => {
    if (err) return done(err);
    if (n < buf.length) return writeAll(fd, buf.subarray(n), done);
    done(null);
  });
}

function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** One process per directory: two writers would interleave and clobber each other's compactions. */
function lock(dir: string): void {
  const path = join(dir, LOCK);
  try {
    writeFileSync(path, String(process.pid), { flag: 'wx' });
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const holder = Number(readFileSync(path, 'utf8'));
  if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
    throw new Error(`history directory ${dir} is in use by process ${holder} (if that is not a realtime process, remove ${path})`);
  }
  writeFileSync(path, String(process.pid));
}

function unlock(dir: string): void {
  try {
    if (readFileSync(join(dir, LOCK), 'utf8') === String(process.pid)) unlinkSync(join(dir, LOCK));
  } catch {
    // Already gone.
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
