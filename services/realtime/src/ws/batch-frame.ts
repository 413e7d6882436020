/**
 * The opt-in `batch` frame (PROTOCOL.md "Batched delivery"): the frames a
 * connection would have been sent one by one in one turn of the event loop,
 * in order, as `{"type":"batch","frames":[...]}`. Subscribers of the same
 * channels get the same frames in a turn, so the last batch built is
 * remembered: one batch is built once per process, like a single message.
 */
const PREFIX = Buffer.from('{"type":"batch","frames":[');
const COMMA = Buffer.from(',');
const SUFFIX = Buffer.from(']}');

let lastParts: ReadonlyArray<Buffer | string> | undefined;
let lastFrame: Buffer | undefined;

function sameParts(a: ReadonlyArray<Buffer | string>, b: ReadonlyArray<Buffer | string>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `parts` are complete frames (JSON objects), as sendMessage takes them. */
export function batchFrame(parts: ReadonlyArray<Buffer | string>): Buffer {
  if (lastParts && lastFrame && sameParts(parts, lastParts)) return lastFrame;
  const chunks: Buffer[] = [PREFIX];
  parts.forEach((p, i) => {
    if (i > 0) chunks.push(COMMA);
    chunks.push(typeof p === 'string' ? Buffer.from(p) : p);
  });
  chunks.push(SUFFIX);
  lastParts = parts.slice();
  lastFrame = Buffer.concat(chunks);
  return lastFrame;
}

/** A batch is sent once its frames reach this many bytes (the rest go in the next one). */
export const MAX_BATCH_BYTES = 64 * 1024;
