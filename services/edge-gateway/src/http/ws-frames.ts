/**
 * Where the WebSocket frames of a byte stream end (RFC 6455 section 5.2),
 * reading only their headers: the gateway pipes upgraded sockets byte for
 * byte and must know a frame boundary to add a close frame of its own when it
 * stops. The cost on the pipe is a few comparisons per frame header; payload
 * bytes are skipped by count, never read.
 */
export class FrameBoundary {
  private readonly header = Buffer.alloc(14);
  private headerLength = 0;
  /** Payload bytes of the current frame not seen yet. */
  private remaining = 0;

  /** True between frames: everything seen so far ends with a whole frame. */
  get atBoundary(): boolean {
    return this.remaining === 0 && this.headerLength === 0;
  }

  /**
   * Takes `chunk` (the bytes that follow what was seen before). With
   * `stopAtBoundary`, stops right after the first frame that ends in it and
   * returns how many bytes that took; otherwise takes it all (returns its length).
   */
  advance(chunk: Buffer, stopAtBoundary = false): number {
    let i = 0;
    while (i < chunk.length) {
      if (this.remaining > 0) {
        const n = Math.min(this.remaining, chunk.length - i);
        this.remaining -= n;
        i += n;
        if (this.remaining === 0 && stopAtBoundary) return i;
        continue;
      }
      this.header[this.headerLength++] = chunk[i++]!;
      const size = this.headerSize();
      if (size !== undefined && this.headerLength === size) {
        this.remaining = this.payloadLength();
        this.headerLength = 0;
        if (this.remaining === 0 && stopAtBoundary) return i;
      }
    }
    return i;
  }

  /** The header's whole size once its second byte is known: 2, plus 2 or 8 for an extended length, plus 4 for a mask. */
  private headerSize(): number | undefined {
    if (this.headerLength < 2) return undefined;
    const len7 = this.header[1]! & 0x7f;
    return 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (this.header[1]! & 0x80 ? 4 : 0);
  }

  private payloadLength(): number {
    const len7 = this.header[1]! & 0x7f;
    if (len7 === 126) return this.header.readUInt16BE(2);
    // A 64-bit length past 2^53 is no frame any peer sends; treated as endless, the stop then waits out its bound.
    if (len7 === 127) return Number(this.header.readBigUInt64BE(2));
    return len7;
  }
}

/** A server-to-client close frame (unmasked) with `code` and a short UTF-8 reason. */
export function closeFrame(code: number, reason: string): Buffer {
  const text = Buffer.from(reason, 'utf8');
  const frame = Buffer.alloc(4 + text.length);
  frame[0] = 0x88;
  frame[1] = 2 + text.length;
  frame.writeUInt16BE(code, 2);
  text.copy(frame, 4);
  return frame;
}
