import type WebSocket from 'ws';
import { describe, expect, it } from 'vitest';
import { countMessages, PROTOCOLS } from './ws-protocols';

/** A socket stand-in that records what the counter answers (PONGs). */
function fakeSocket(): { ws: WebSocket; sent: unknown[] } {
  const sent: unknown[] = [];
  return { ws: { send: (d: unknown) => sent.push(d) } as unknown as WebSocket, sent };
}

const msg = (n: number) => `MSG bench.fanout 1 ${n}\r\n${'x'.repeat(n)}\r\n`;

describe('peer delivery counters', () => {
  it('counts every NATS MSG in a frame, one split over two frames, and answers PING', () => {
    const { ws, sent } = fakeSocket();
    const count = PROTOCOLS.nats.counter!(ws);
    const stream = Buffer.from(msg(100) + msg(100) + 'PING\r\n' + msg(100));
    const cut = stream.indexOf('MSG', 10) + 2; // inside the second "MSG "
    expect(count(stream.subarray(0, cut)) + count(stream.subarray(cut))).toBe(3);
    expect(sent).toEqual(['PONG\r\n']);
  });

  it('counts MQTT PUBLISH packets across frame boundaries and skips other packets', () => {
    const { ws } = fakeSocket();
    const count = PROTOCOLS.mqtt.counter!(ws);
    const publish = PROTOCOLS.mqtt.publishFrame('bench/fanout', 'x'.repeat(200)) as Buffer;
    const suback = Buffer.from([0x90, 3, 0, 1, 0]);
    const stream = Buffer.concat([publish, suback, publish, publish]);
    let total = 0;
    for (let at = 0; at < stream.length; at += 7) total += count(stream.subarray(at, at + 7));
    expect(total).toBe(3);
    // 200 bytes of payload need a two-byte remaining length.
    expect(publish[1]! & 0x80).toBe(0x80);
  });

  it('counts our messages alone or inside a batch frame, and nothing else', () => {
    const one = JSON.stringify({ type: 'message', topic: 't', id: '1-1', user_id: 'u', data: 'x', created_at: '2026-01-01T00:00:00.000Z' });
    expect(countMessages(Buffer.from(one))).toBe(1);
    expect(countMessages(Buffer.from(`{"type":"batch","frames":[${one},${one},${one}]}`))).toBe(3);
    expect(countMessages(Buffer.from('{"type":"published","topic":"t","id":"1-1"}'))).toBe(0);
    const compact = (id: string) => JSON.stringify({ id, user_id: 'u', data: {}, created_at: '2026-01-01T00:00:00.000Z' });
    expect(countMessages(Buffer.from(`{"type":"batch","topic":"t","frames":[${compact('1-1')},${compact('1-2')},${one},{"type":"join","topic":"t","member":{"user_id":"u"}}]}`))).toBe(3);
    expect(countMessages(Buffer.from('{"type":"ready","tenant_id":"t","user_id":"u","expires_at":1}'))).toBe(0);
    expect(PROTOCOLS.relay.url('ws://h:1')).toBe('ws://h:1/ws?batch=2');
    expect(PROTOCOLS.relayPlain.url('ws://h:1')).toBe('ws://h:1/ws');
    expect(PROTOCOLS.wsBatch.url('ws://h:1')).toBe('ws://h:1/?batch=2');
    expect(PROTOCOLS.ws.url('ws://h:1')).toBe('ws://h:1/');
  });
});
