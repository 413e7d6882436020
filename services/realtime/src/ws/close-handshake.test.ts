import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { issueToken, useRealtime } from '../test-support/realtime-harness';

/** A WebSocket client on a raw socket: it upgrades, then only records what arrives; it never answers a close. */
async function silentClient(port: number, token: string): Promise<{ socket: Socket; received: () => Buffer; ended: Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<void>((resolve) => socket.once('end', resolve));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(
    `GET /ws?access_token=${token} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  // The 101 and the `ready` frame.
  for (let i = 0; i < 100 && !Buffer.concat(chunks).includes('"ready"'); i++) await new Promise((r) => socket.once('data', r));
  return { socket, received: () => Buffer.concat(chunks), ended };
}

/** The close frame's code (server frames are unmasked; a close code is the first two payload bytes). */
function closeCodeIn(bytes: Buffer): number | undefined {
  let i = bytes.indexOf('\r\n\r\n') + 4;
  while (i + 2 <= bytes.length) {
    const opcode = bytes[i]! & 0x0f;
    let len = bytes[i + 1]! & 0x7f;
    let at = i + 2;
    if (len === 126) {
      len = bytes.readUInt16BE(at);
      at += 2;
    }
    if (opcode === 0x8) return bytes.readUInt16BE(at);
    i = at + len;
  }
  return undefined;
}

describe('closing a connection', () => {
  const running = useRealtime();

  it('sends the close frame and then ends its side at once: a client that has not answered yet sees the code and the end of the stream', async () => {
    const { rt, verifier } = running;
    const { token, identity } = issueToken(verifier);
    const client = await silentClient(rt.server.port, token);
    try {
      await rt.feed.push({ tenant_id: identity.tenantId, kind: 'disabled', version: 1, revoked_key_versions: [] });
      // Without the half-close the server would wait for the client's close reply (30 s) before ending.
      await client.ended;
      expect(closeCodeIn(client.received())).toBe(4401);
    } finally {
      client.socket.destroy();
    }
  });
});
