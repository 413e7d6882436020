import { randomBytes, randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { signWithJose } from '../support/host';
import { startStack, type Stack } from '../support/stack';
import { TestSocket } from '../support/ws-client';
import { createVictim, expectNoSecretsInLogs, expectStillServing, portOf, within, type Victim } from './support/attack-kit';

const MAX_FRAME_BYTES = 131_072;

/** A masked client frame written by hand (ws would refuse to send some of these). */
function clientFrame(opcode: number, payload: Buffer, opts: { rsv1?: boolean; declaredLength?: bigint } = {}): Buffer {
  const first = 0x80 | (opts.rsv1 ? 0x40 : 0) | opcode;
  const len = opts.declaredLength ?? BigInt(payload.length);
  let header: Buffer;
  if (len < 126n) header = Buffer.from([first, 0x80 | Number(len)]);
  else if (len < 65536n) {
    header = Buffer.alloc(4);
    header[0] = first;
    header[1] = 0x80 | 126;
    header.writeUInt16BE(Number(len), 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = first;
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(len, 2);
  }
  const mask = randomBytes(4);
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i]! ^= mask[i % 4]!;
  return Buffer.concat([header, mask, masked]);
}

/**
 * A raw WebSocket: the handshake by hand, then frames written as bytes.
 * Resolves with the response head and the socket; `closeCode` reads the
 * server's close frame (or undefined when the socket just ended).
 */
async function rawWs(url: string, token: string, extraHeaders = ''): Promise<{ head: string; write(b: Buffer): void; closeCode: Promise<number | undefined> }> {
  const socket = connect(portOf(url), '127.0.0.1');
  socket.on('error', () => {});
  let buf = Buffer.alloc(0);
  let head = '';
  let resolveHead: (h: string) => void;
  const headP = new Promise<string>((r) => (resolveHead = r));
  const closeCode = new Promise<number | undefined>((resolve) => {
    const tryClose = () => {
      if (!head) return;
      // Server frames are unmasked; a close frame is opcode 8 with the code in the first two payload bytes.
      let i = 0;
      while (i + 2 <= buf.length) {
        const op = buf[i]! & 0x0f;
        let len = buf[i + 1]! & 0x7f;
        let off = 2;
        if (len === 126) {
          if (i + 4 > buf.length) return;
          len = buf.readUInt16BE(i + 2);
          off = 4;
        } else if (len === 127) return;
        if (i + off + len > buf.length) return;
        if (op === 8) return resolve(len >= 2 ? buf.readUInt16BE(i + off) : 1005);
        i += off + len;
      }
    };
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!head) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = buf.subarray(0, end).toString('latin1');
        buf = buf.subarray(end + 4);
        resolveHead(head);
      }
      tryClose();
    });
    socket.on('close', () => resolve(undefined));
  });
  socket.write(
    `GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nAuthorization: Bearer ${token}\r\n${extraHeaders}\r\n`,
  );
  return { head: await headP, write: (b) => socket.write(b), closeCode };
}

// Attacks on the WebSocket side of the distributed deployment. After each one:
// every service is healthy and a valid user is served over REST and WebSocket.
describe('attack: WebSocket', () => {
  let stack: Stack;
  let alice: Victim;
  let bob: Victim;
  const extraTokens: string[] = [];

  beforeAll(async () => {
    stack = await startStack();
    alice = await createVictim(stack);
    bob = await createVictim(stack);
  });
  afterEach(async () => {
    await expectStillServing(stack, alice);
  });
  afterAll(async () => {
    if (stack) expectNoSecretsInLogs(stack, [alice?.secret, alice?.host_sync_client_secret, alice?.token, bob?.secret, bob?.host_sync_client_secret, bob?.token, ...extraTokens]);
    await stack?.stop();
  });

  it('identity headers on the upgrade are ignored: identity comes only from the token', async () => {
    const ws = new WebSocket(stack.realtimeWs[0]!, {
      headers: { authorization: `Bearer ${alice.token}`, 'x-relay-tenant-id': bob.tenant_id, 'x-relay-user-id': bob.userId, 'x-internal-token': stack.internalToken },
    });
    const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.once('message', (d) => resolve(JSON.parse(d.toString()) as Record<string, unknown>));
      ws.once('error', reject);
    });
    expect(ready).toMatchObject({ type: 'ready', tenant_id: alice.tenant_id, user_id: alice.userId });
    ws.terminate();
    // The realtime REST side, reached directly with identity headers but no internal token: 401.
    const direct = await fetch(`${stack.realtimeWs[0]!.replace(/^ws/, 'http').replace(/\/ws$/, '')}/api/v1/me`, {
      headers: { 'x-relay-tenant-id': bob.tenant_id, 'x-relay-user-id': bob.userId, 'x-relay-expires-at': '99999999999', 'x-internal-token': 'x'.repeat(43) },
    });
    expect(direct.status).toBe(401);
  });

  it('odd Authorization headers are judged alike by the gateway (REST) and realtime (upgrade)', async () => {
    const t = alice.token;
    const variants = [`Bearer ${t}`, `bearer ${t}`, `BEARER  ${t}`, `Bearer ${t} `, `Bearer\t${t}`, `Bearer ${t},`, `Bearer ${t}, Bearer ${t}`, `Bearer "${t}"`, `Bearer ${t}=`, `Bearer ${t}x`, `Basic ${t}`, `Bearer`, `Bearer ${t.replace('.', '. ')}`, `Token ${t}`, `Bearer ${t}\u00a0`];
    const mismatches: string[] = [];
    let accepted = 0;
    for (const v of variants) {
      const rest = await fetch(`${stack.gatewayUrl}/api/v1/me`, { headers: { authorization: v } }).then((r) => r.status, () => 400);
      const ws = await new Promise<number>((resolve) => {
        let socket: WebSocket;
        try {
          socket = new WebSocket(stack.realtimeWs[1]!, { headers: { authorization: v } });
        } catch {
          return resolve(400);
        }
        socket.once('open', () => {
          socket.terminate();
          resolve(101);
        });
        socket.once('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0);
          res.resume();
        });
        socket.once('error', () => resolve(-1));
      });
      const restOk = rest === 200;
      const wsOk = ws === 101;
      if (restOk && wsOk) accepted++;
      if (restOk !== wsOk || (!restOk && (rest === 500 || ws === 500))) mismatches.push(`${JSON.stringify(v.replace(t, '<token>'))}: gateway ${rest}, realtime ${ws}`);
    }
    expect(mismatches).toEqual([]);
    // At least the plain, lower-case, double-space and trailing-space forms.
    expect(accepted).toBeGreaterThanOrEqual(4);
  });

  it('permessage-deflate offered is not negotiated, and a compressed frame anyway closes the connection', async () => {
    const ws = new WebSocket(stack.realtimeWs[0]!, { headers: { authorization: `Bearer ${alice.token}` }, perMessageDeflate: true });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    expect(ws.extensions).toBe('');
    ws.terminate();
    const raw = await rawWs(stack.realtimeWs[0]!, alice.token, 'Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n');
    expect(raw.head).toMatch(/^HTTP\/1\.1 101/);
    expect(raw.head).not.toMatch(/sec-websocket-extensions/i);
    // RSV1 set on a text frame: a protocol error (1002), not a decompression.
    raw.write(clientFrame(0x1, Buffer.from([0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]), { rsv1: true }));
    expect(await within(raw.closeCode, 5000)).toBe(1002);
  });

  it('frames over MAX_FRAME_BYTES close with 1009, also when only the length is declared', async () => {
    const s = await TestSocket.open(stack.realtimeWs[0]!, alice.token);
    s.ws.send(JSON.stringify({ type: 'publish', topic: `tenants/${alice.tenant_id}/channels/big`, data: 'x'.repeat(MAX_FRAME_BYTES + 10) }));
    expect(await s.closed(5000)).toBe(1009);
    // A 64-bit length of 2^62 bytes, nothing after it: refused at the header.
    const raw = await rawWs(stack.realtimeWs[1]!, alice.token);
    raw.write(clientFrame(0x1, Buffer.alloc(0), { declaredLength: 1n << 62n }));
    expect(await within(raw.closeCode, 5000)).toBe(1009);
    // A fragmented message whose fragments together pass the limit.
    const frag = await rawWs(stack.realtimeWs[1]!, alice.token);
    const piece = Buffer.alloc(60_000, 0x61);
    frag.write(Buffer.concat([clientFrame(0x1, piece).fill(0x01, 0, 1), clientFrame(0x0, piece).fill(0x00, 0, 1), clientFrame(0x0, piece).fill(0x00, 0, 1)]));
    expect(await within(frag.closeCode, 5000)).toBe(1009);
  });

  it('JSON nested 5,000 deep in a frame is invalid_frame, the connection stays', async () => {
    const s = await TestSocket.open(stack.realtimeWs[0]!, alice.token);
    const topic = `tenants/${alice.tenant_id}/channels/deep`;
    s.ws.send(`{"type":"publish","topic":"${topic}","data":${'['.repeat(5000)}${']'.repeat(5000)},"ref":"a"}`);
    expect(await s.next((f) => f.ref === 'a')).toMatchObject({ type: 'error', code: 'invalid_frame' });
    s.ws.send(`{"type":"publish","topic":"${topic}","data":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)},"ref":"b"}`);
    expect(await s.next((f) => f.ref === 'b')).toMatchObject({ type: 'error', code: 'invalid_frame' });
    s.ws.send(`${'['.repeat(5000)}${']'.repeat(5000)}`);
    expect(await s.next((f) => f.type === 'error')).toMatchObject({ code: 'invalid_frame' });
    s.send({ type: 'subscribe', topic, ref: 'c' });
    expect(await s.next((f) => f.ref === 'c')).toMatchObject({ type: 'subscribed' });
    s.close();
  });

  it("a flood of auth frames on one socket does not stop another tenant's upgrade", async () => {
    const flooder = await TestSocket.open(stack.realtimeWs[0]!, alice.token);
    const valid = await signWithJose(alice.secret, alice.tenant_id, alice.userId, 600);
    extraTokens.push(valid);
    const garbage = `${alice.token.slice(0, -4)}AAAA`;
    // 3,000 auth frames, valid and invalid mixed, written without waiting for answers.
    const frames = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ type: 'auth', token: i % 3 === 0 ? valid : i % 3 === 1 ? garbage : randomUUID(), ref: i }));
    for (const f of frames) flooder.ws.send(f);
    const started = Date.now();
    const other = await TestSocket.open(stack.realtimeWs[0]!, bob.token);
    const upgradeMs = Date.now() - started;
    other.send({ type: 'subscribe', topic: `tenants/${bob.tenant_id}/channels/x`, ref: 's' });
    expect(await other.next((f) => f.ref === 's')).toMatchObject({ type: 'subscribed' });
    expect(upgradeMs).toBeLessThan(5000);
    other.close();
    // The flooder gets contract answers (or is cut off for flooding), never `internal`.
    const codes = new Set(flooder.frames.filter((f) => f.type === 'error').map((f) => f.code));
    for (const c of codes) expect(['invalid_or_missing_token', 'rate_limited', 'auth_unavailable']).toContain(c);
    flooder.close();
  });

  it('a silent upgrade (never completed) and a half-sent frame do not hold the service', async () => {
    const socket = connect(portOf(stack.realtimeWs[1]!), '127.0.0.1');
    socket.on('error', () => {});
    socket.write(`GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n`);
    const half = await rawWs(stack.realtimeWs[1]!, alice.token);
    half.write(clientFrame(0x1, Buffer.from('{"type":"subscribe"')).subarray(0, 6));
    const s = await TestSocket.open(stack.realtimeWs[1]!, bob.token);
    s.close();
    socket.destroy();
  });
});
