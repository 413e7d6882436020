import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { serverTextFrame } from './server-frame';

// ws's Sender is not in its typings' exports; it is the reference for the frame bytes.
const { Sender } = createRequire(import.meta.url)('ws') as { Sender: { frame(data: Buffer, options: Record<string, unknown>): Buffer[] } };

describe('serverTextFrame', () => {
  it.each([0, 1, 125, 126, 65_535, 65_536, 70_000])('matches ws own unmasked text frame for %i bytes', (n) => {
    const payload = Buffer.alloc(n, 0x61);
    const ws = Sender.frame(payload, { fin: true, mask: false, opcode: 1, readOnly: false, rsv1: false });
    expect(serverTextFrame(payload).equals(Buffer.concat(ws))).toBe(true);
  });
});
