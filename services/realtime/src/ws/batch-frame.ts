/**
 * The opt-in `batch` frame (PROTOCOL.md "Batched delivery"): the frames a
 * connection would have been sent one by one in one turn of the event loop,
 * in order, as `{"type":"batch","frames":[...]}`. Subscribers of the same
 * channels get the same frames in a turn, so the last batch built is
 * remembered: one batch is built once per process, like a single message.
 *
 * A compact batch (`batch=2`) names the topic of its first `message` once,
 * `{"type":"batch","topic":T,"frames":[...]}`, and sends each `message` of
 * that topic as its members after `topic` only (`{"id",…}`): in the fan-out
 * bench a message was 312 bytes, 94 of them `"type":"message","topic":T,`,
 * and writing the bytes to the sockets was ~60% of realtime's CPU.
 */
const PREFIX = Buffer.from('{"type":"batch","frames":[');
const COMMA = Buffer.from(',');
const SUFFIX = Buffer.from(']}');
const OPEN = Buffer.from('{');
/** How every `message` frame begins (messageFrame in messaging/message.ts). */
const MESSAGE_START = '{"type":"message","topic":"';

/** What each kind of batch built last: the parts it was built from and the bytes. */
interface Built {
  parts: ReadonlyArray<Buffer | string> | undefined;
  frame: Buffer | undefined;
}
const last: Record<'frames' | 'compact', Built> = { frames: { parts: undefined, frame: undefined }, compact: { parts: undefined, frame: undefined } };

function sameParts(a: ReadonlyArray<Buffer | string>, b: ReadonlyArray<Buffer | string>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const bufferOf = (p: Buffer | string): Buffer => (typeof p === 'string' ? Buffer.from(p) : p);

/** `"type":"message","topic":T,` as the first message frame among `parts` begins, T's JSON string included; undefined without one. */
function messagePrefix(parts: readonly Buffer[]): Buffer | undefined {
  for (const b of parts) {
    if (b.length <= MESSAGE_START.length || b.toString('latin1', 0, MESSAGE_START.length) !== MESSAGE_START) continue;
    // Topics are ASCII without quotes or backslashes (PROTOCOL.md "Frames"), so the string ends at the next quote.
    const end = b.indexOf(0x22, MESSAGE_START.length);
    if (end < 0 || b[end + 1] !== 0x2c) continue;
    return b.subarray(0, end + 2);
  }
  return undefined;
}

/** `parts` are complete frames (JSON objects), as sendMessage takes them; `compact`: the client asked for `batch=2`. */
export function batchFrame(parts: ReadonlyArray<Buffer | string>, compact = false): Buffer {
  const memo = last[compact ? 'compact' : 'frames'];
  if (memo.parts && memo.frame && sameParts(parts, memo.parts)) return memo.frame;
  const bufs = parts.map(bufferOf);
  const prefix = compact ? messagePrefix(bufs) : undefined;
  const chunks: Buffer[] = [prefix ? Buffer.from(`{"type":"batch","topic":${prefix.toString('latin1', MESSAGE_START.length - 1, prefix.length - 1)},"frames":[`) : PREFIX];
  bufs.forEach((b, i) => {
    if (i > 0) chunks.push(COMMA);
    if (prefix && b.length > prefix.length && prefix.compare(b, 0, prefix.length) === 0) chunks.push(OPEN, b.subarray(prefix.length));
    else chunks.push(b);
  });
  chunks.push(SUFFIX);
  memo.parts = parts.slice();
  memo.frame = Buffer.concat(chunks);
  return memo.frame;
}

/** What a connection asked for: no batches, `batch=1`, or compact ones (`batch=2`). */
export type BatchMode = 'none' | 'frames' | 'compact';

/** A batch is sent once its frames reach this many bytes (the rest go in the next one). */
export const MAX_BATCH_BYTES = 64 * 1024;
