import { describe, expect, it } from 'vitest';
import { closeFrame, FrameBoundary } from './ws-frames';

/** A server frame (unmasked unless `mask`) with `payload`, the way ws and realtime write them. */
function frame(payload: Buffer, opts: { opcode?: number; mask?: boolean } = {}): Buffer {
  const len = payload.length;
  const ext = len < 126 ? Buffer.alloc(0) : len < 65536 ? Buffer.alloc(2) : Buffer.alloc(8);
  if (len >= 126 && len < 65536) ext.writeUInt16BE(len);
  if (len >= 65536) ext.writeBigUInt64BE(BigInt(len));
  const head = Buffer.from([0x80 | (opts.opcode ?? 1), (opts.mask ? 0x80 : 0) | (len < 126 ? len : len < 65536 ? 126 : 127)]);
  return Buffer.concat([head, ext, opts.mask ? Buffer.from([1, 2, 3, 4]) : Buffer.alloc(0), payload]);
}

const FRAMES = [
  frame(Buffer.from('hi')),
  frame(Buffer.alloc(0), { opcode: 9 }), // an empty ping
  frame(Buffer.alloc(200, 1)), // 16-bit length
  frame(Buffer.alloc(70_000, 2)), // 64-bit length
  frame(Buffer.from('masked'), { mask: true }),
  frame(Buffer.from('{"type":"message"}')),
];
const STREAM = Buffer.concat(FRAMES);
const ENDS = FRAMES.reduce<number[]>((acc, f) => [...acc, (acc.at(-1) ?? 0) + f.length], []);

describe('FrameBoundary', () => {
  it('is at a boundary exactly after each frame, however the stream is cut into chunks', () => {
    for (const size of [1, 2, 3, 7, 13, 126, 1000, 65_536, STREAM.length]) {
      const b = new FrameBoundary();
      const boundaries: number[] = [];
      for (let at = 0; at < STREAM.length; at += size) {
        const chunk = STREAM.subarray(at, Math.min(at + size, STREAM.length));
        // Byte by byte within the chunk to see every position (the same state machine).
        for (let k = 0; k < chunk.length; k++) {
          b.advance(chunk.subarray(k, k + 1));
          if (b.atBoundary) boundaries.push(at + k + 1);
        }
      }
      expect(boundaries, `chunks of ${size}`).toEqual(ENDS);
    }
  });

  it('with stopAtBoundary, stops right after the frame in progress ends, from any position', () => {
    for (let cut = 0; cut < STREAM.length; cut += 997) {
      const b = new FrameBoundary();
      b.advance(STREAM.subarray(0, cut));
      const rest = STREAM.subarray(cut);
      const taken = b.advance(rest, true);
      const end = ENDS.find((e) => e > cut) ?? STREAM.length;
      expect(b.atBoundary).toBe(true);
      // At a boundary already: the next frame is taken whole (the caller checks atBoundary first).
      expect(cut + taken, `cut at ${cut}`).toBe(ENDS.includes(cut) ? (ENDS.find((e) => e > cut) ?? STREAM.length) : end);
    }
  });
});

describe('closeFrame', () => {
  it('is a final, unmasked close frame with the code (big-endian) and the reason (RFC 6455 5.5.1)', () => {
    expect([...closeFrame(1001, 'gateway stopping')]).toEqual([0x88, 18, 0x03, 0xe9, ...Buffer.from('gateway stopping')]);
    const b = new FrameBoundary();
    b.advance(closeFrame(1001, 'bye'));
    expect(b.atBoundary).toBe(true);
  });
});
