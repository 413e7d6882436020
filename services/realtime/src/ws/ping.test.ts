import { describe, expect, it } from 'vitest';
import { issueToken, useRealtime } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { parseClientFrame } from './client-frame';

// The application-level ping (docs/PROTOCOL.md): a frame a client can send to
// learn that the connection is alive end to end; WebSocket pings are invisible
// to browser scripts.
describe('ping frame', () => {
  const running = useRealtime();

  it('parses with or without a ref; other members are ignored', () => {
    expect(parseClientFrame('{"type":"ping"}')).toEqual({ ok: true, frame: { type: 'ping', ref: undefined } });
    expect(parseClientFrame('{"type":"ping","ref":7,"topic":"x"}')).toEqual({ ok: true, frame: { type: 'ping', ref: 7 } });
  });

  it('is answered pong with the ref echoed, before and after subscribing, and needs no topic', async () => {
    const { token } = issueToken(running.verifier);
    const c = await WsTestClient.connect(running.rt.ws, token);
    expect(await c.request({ type: 'ping' })).toEqual({ type: 'pong', ref: expect.any(String) });
    c.send({ type: 'ping' });
    expect(await c.next('pong')).toEqual({ type: 'pong' });
    await c.close();
  });
});
