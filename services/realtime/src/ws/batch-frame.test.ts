import type { Socket } from 'node:net';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { fakeConnection } from '../test-support/fake-connection';
import { issueToken, startRealtime, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { makeMessage, messageFrame, SERVER_USER_ID } from '../messaging/message';
import { batchFrame, MAX_BATCH_BYTES } from './batch-frame';

const nextTick = () => new Promise<void>((resolve) => process.nextTick(resolve));
const message = (n: number) => Buffer.from(JSON.stringify({ type: 'message', topic: 't', id: `1-${n}`, data: n }));

function connection(batching: boolean) {
  const made = fakeConnection({ batching, context: { maxBufferedBytes: 1 << 24 } });
  made.socket.sent.splice(0); // the `ready` frame
  return made;
}

describe('batch frames (/ws?batch=1)', () => {
  it('a batching connection gets the frames of one tick as one batch frame, in order', async () => {
    const { socket, conn } = connection(true);
    for (let i = 1; i <= 3; i++) conn.sendMessage(message(i));
    conn.sendMessage('{"type":"join","topic":"t","member":{"user_id":"u"}}');
    expect(socket.sent).toEqual([]);
    await nextTick();
    expect(socket.sent).toEqual([
      {
        type: 'batch',
        frames: [
          { type: 'message', topic: 't', id: '1-1', data: 1 },
          { type: 'message', topic: 't', id: '1-2', data: 2 },
          { type: 'message', topic: 't', id: '1-3', data: 3 },
          { type: 'join', topic: 't', member: { user_id: 'u' } },
        ],
      },
    ]);
    // A tick with one frame sends it as it is.
    conn.sendMessage(message(4));
    await nextTick();
    expect(socket.sent.at(-1)).toEqual({ type: 'message', topic: 't', id: '1-4', data: 4 });
  });

  it('a connection that did not ask gets every frame alone', async () => {
    const { socket, conn } = connection(false);
    for (let i = 1; i <= 3; i++) conn.sendMessage(message(i));
    await nextTick();
    expect(socket.sent.map((f) => f.type)).toEqual(['message', 'message', 'message']);
  });

  it('a reply or a close keeps its place after the frames held before it', async () => {
    const { socket, conn } = connection(true);
    conn.sendMessage(message(1));
    conn.sendMessage(message(2));
    conn.onFrame('{"type":"ping","ref":"p"}');
    await nextTick();
    expect(socket.sent.map((f) => f.type)).toEqual(['batch', 'pong']);
    conn.sendMessage(message(3));
    conn.close(1001, 'going away');
    await nextTick();
    expect(socket.sent.at(-1)).toEqual({ type: 'message', topic: 't', id: '1-3', data: 3 });
  });

  it('a tick holding more than MAX_BATCH_BYTES goes out in several batches, nothing lost or reordered', async () => {
    const { socket, conn } = connection(true);
    const big = (n: number) => Buffer.from(JSON.stringify({ type: 'message', topic: 't', id: `1-${n}`, data: 'x'.repeat(10_000) }));
    const count = Math.ceil((3 * MAX_BATCH_BYTES) / 10_000);
    for (let i = 0; i < count; i++) conn.sendMessage(big(i));
    await nextTick();
    expect(socket.sent.length).toBeGreaterThan(2);
    const ids = socket.sent.flatMap((f) => (f.type === 'batch' ? (f.frames as Array<{ id: string }>) : [f as { id: string }])).map((f) => f.id);
    expect(ids).toEqual(Array.from({ length: count }, (_, i) => `1-${i}`));
  });

  it('builds a batch once for every connection that holds the same frames', () => {
    const parts = [message(1), message(2)];
    expect(batchFrame(parts)).toBe(batchFrame([parts[0]!, parts[1]!]));
    expect(batchFrame([parts[1]!, parts[0]!])).not.toBe(batchFrame(parts));
    // Each kind of batch remembers its own.
    expect(batchFrame(parts, true)).toBe(batchFrame([parts[0]!, parts[1]!], true));
    expect(batchFrame(parts, true).equals(batchFrame(parts))).toBe(false);
  });
});

describe('compact batch frames (/ws?batch=2)', () => {
  const ref = { tenantId: '00000000-0000-4000-8000-000000000001', channel: 'room' };
  const topic = `tenants/${ref.tenantId}/channels/room`;
  const other = `tenants/${ref.tenantId}/channels/other`;
  const made = (n: number, userId = 'u-1') => makeMessage(`${n}-0`, ref.channel, userId, JSON.stringify({ n, s: 'q"\\' }));
  /** Read as PROTOCOL.md says: a member of a compact batch without a type is a `message` of the batch's topic. */
  const expand = (f: Record<string, unknown>) =>
    f.type === 'batch' ? (f.frames as Array<Record<string, unknown>>).map((inner) => (inner.type === undefined && typeof f.topic === 'string' ? { type: 'message', topic: f.topic, ...inner } : inner)) : [f];

  it('names the topic once and sends its messages without type and topic; other frames whole; read back, the same frames as batch=1', async () => {
    const frames: Array<Buffer | string> = [
      Buffer.from(messageFrame(topic, made(1))),
      messageFrame(other, made(2)),
      '{"type":"join","topic":"' + topic + '","member":{"user_id":"u"}}',
      Buffer.from(messageFrame(topic, { ...made(3), userId: SERVER_USER_ID })),
    ];
    const compact = fakeConnection({ batching: 'compact', context: { maxBufferedBytes: 1 << 24 } });
    const plain = connection(true);
    compact.socket.sent.splice(0);
    for (const f of frames) {
      compact.conn.sendMessage(f);
      plain.conn.sendMessage(f);
    }
    await nextTick();
    const [batch] = compact.socket.sent;
    expect(batch).toMatchObject({ type: 'batch', topic });
    const inner = (batch as { frames: Array<Record<string, unknown>> }).frames;
    expect(inner[0]).toEqual({ id: '1-0', user_id: 'u-1', data: { n: 1, s: 'q"\\' }, created_at: expect.any(String) });
    expect(inner[1]).toMatchObject({ type: 'message', topic: other });
    expect(inner[2]).toMatchObject({ type: 'join', topic });
    expect(inner[3]).toMatchObject({ user_id: null, from: 'server' });
    expect(expand(batch!)).toEqual(expand(plain.socket.sent[0]!));
    expect(expand(batch!)).toEqual(frames.map((f) => JSON.parse(String(f))));
  });

  it('a batch without a message stays as batch=1 has it; a tick with one frame sends it whole', async () => {
    const { socket, conn } = fakeConnection({ batching: 'compact', context: { maxBufferedBytes: 1 << 24 } });
    socket.sent.splice(0);
    conn.sendMessage(`{"type":"join","topic":"${topic}","member":{"user_id":"a"}}`);
    conn.sendMessage(`{"type":"leave","topic":"${topic}","member":{"user_id":"b"}}`);
    await nextTick();
    expect(socket.sent[0]).toEqual({ type: 'batch', frames: [expect.objectContaining({ type: 'join' }), expect.objectContaining({ type: 'leave' })] });
    conn.sendMessage(messageFrame(topic, made(4)));
    await nextTick();
    expect(socket.sent[1]).toMatchObject({ type: 'message', topic, id: '4-0' });
  });
});

describe('batch frames against a running realtime', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  /**
   * A subscriber opened with `query` and a plain one on a fresh topic, then 50
   * publishes in one TCP write: realtime reads them together, so their
   * deliveries share a tick. Returns the messages each got (the batched
   * one's read back from its batches, as PROTOCOL.md says) and its raw frames.
   */
  async function burst(query: string, data: (i: number) => unknown) {
    const { identity } = issueToken(verifier);
    const token = () => issueToken(verifier, { tenantId: identity.tenantId }).token;
    const topic = topicFor(identity.tenantId, 'burst');
    const batched = await WsTestClient.connect(`${rt.ws}?${query}`, token());
    const plain = await WsTestClient.connect(rt.ws, token());
    const publisher = await WsTestClient.connect(rt.ws, token());
    try {
      for (const c of [batched, plain]) expect(await c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
      const socket = (publisher.ws as unknown as { _socket: Socket })._socket;
      socket.cork();
      for (let i = 0; i < 50; i++) publisher.send({ type: 'publish', topic, data: data(i) });
      socket.uncork();
      const inner = () =>
        batched.frames.flatMap((f) =>
          f.type === 'batch' ? (f.frames as Array<Record<string, unknown>>).map((m) => (m.type === undefined ? { type: 'message', topic: f.topic, ...m } : m)) : f.type === 'message' ? [f] : [],
        );
      await vi.waitFor(() => expect(inner()).toHaveLength(50), { timeout: 10_000 });
      const viaPlain = await plain.waitForMessages(topic, 50);
      expect(plain.frames.some((f) => f.type === 'batch')).toBe(false);
      return { topic, viaBatches: inner(), viaPlain, batches: batched.frames.filter((f) => f.type === 'batch') };
    } finally {
      await Promise.all([batched.close(), plain.close(), publisher.close()]);
    }
  }

  it('a burst of 50 publishes reaches a batch=1 subscriber in batch frames and a plain one frame by frame, the same messages in the same order', async () => {
    const { viaBatches, viaPlain, batches } = await burst('batch=1', (i) => i);
    expect(viaBatches).toEqual(viaPlain);
    expect(viaPlain.map((m) => m.data)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(batches.length).toBeGreaterThan(0);
    expect(batches.every((b) => b.topic === undefined)).toBe(true);
  });

  it('a batch=2 subscriber gets the same burst in compact batches: read back, the messages a plain subscriber gets', async () => {
    const { topic, viaBatches, viaPlain, batches } = await burst('batch=2', (i) => ({ i, text: 'ünï "quoted" \\ \u2028' }));
    expect(viaBatches).toEqual(viaPlain);
    expect(batches.length).toBeGreaterThan(0);
    expect(batches.every((b) => b.topic === topic && (b.frames as Array<{ type?: string }>).every((m) => m.type === undefined))).toBe(true);
  });
});
