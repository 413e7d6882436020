import { randomUUID } from 'node:crypto';
import { FakeVerifier } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
import { createRelayClient, isRelayClientError, RelayClientError, SERVER_ERROR_CODES, type RelayClient, type RelayClientOptions } from './index.js';
import { EventRecorder } from './testing/event-recorder.js';
import { readyFrame, StubRelay } from './testing/stub-relay.js';

// Every failure reaches the app as a RelayClientError with a stable code:
// a request's promise rejects, or an `error` event when no promise waits.
describe('RelayClient errors', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const clients: RelayClient[] = [];
  const stubs: StubRelay[] = [];

  const make = (opts: Partial<RelayClientOptions> & { identity?: Partial<VerifiedIdentity> } = {}) => {
    const identity = { tenantId: randomUUID(), userId: randomUUID(), ...opts.identity };
    const client = createRelayClient({
      url: rt.ws,
      WebSocket,
      getToken: async () => issueToken(verifier, identity).token,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      ...opts,
    });
    clients.push(client);
    return { client, events: new EventRecorder(client), identity };
  };
  const stub = async (onConnection: Parameters<typeof StubRelay.start>[0]) => {
    const s = await StubRelay.start(onConnection);
    stubs.push(s);
    return s;
  };
  const codeOf = async (p: Promise<unknown>): Promise<string> => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isRelayClientError(err)).toBe(true);
    return (err as RelayClientError).code;
  };

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier, env: { MAX_SUBSCRIPTIONS: '2' } });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await Promise.all(stubs.splice(0).map((s) => s.stop()));
    verifier.unavailable = false;
    rt.feed.setCurrent(true);
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('refused frames reject their promise with the server code; the connection stays', async () => {
    const { client } = make({ identity: { cap: [{ pattern: 'open', actions: ['subscribe', 'publish'] }] } });
    await client.connect();
    expect(await codeOf(client.subscribe('bad channel'))).toBe('invalid_topic');
    expect(await codeOf(client.subscribe('closed'))).toBe('forbidden_channel');
    expect(await codeOf(client.publish('closed', 1))).toBe('forbidden_channel');
    expect(await codeOf(client.publish('open', 'x'.repeat(70_000)))).toBe('payload_too_large');
    expect(await codeOf(client.publish('open', 1, { idempotencyKey: 'not a key' }))).toBe('invalid_frame');
    const refused = await client.publish('open', 'x'.repeat(70_000)).catch((e: RelayClientError) => e);
    expect(refused).toBeInstanceOf(RelayClientError);
    expect((refused as RelayClientError).details).toMatchObject({ frame: 'publish', topic: 'open', serverCode: 'payload_too_large' });
    // A refused subscribe is not kept: it is not renewed on a reconnect.
    await client.subscribe('open');
    expect(client.state).toBe('open');
  });

  it('too_many_subscriptions, and a publish on an instance that lost its tenant feed', async () => {
    const { client } = make();
    await client.subscribe('a');
    await client.subscribe('b');
    expect(await codeOf(client.subscribe('c'))).toBe('too_many_subscriptions');
    rt.feed.setCurrent(false);
    // An instance that cannot vouch for its connections closes them 1013 (reconnect elsewhere):
    // a publish without an idempotency key cannot be resent safely, so it fails at once.
    expect(await codeOf(client.publish('a', 1, { idempotencyKey: false }))).toBe('connection_lost');
    expect(client.state).not.toBe('connected');
  });

  it('refresh failures are error events and the connection keeps its expiry: invalid token, verifier down, another user', async () => {
    let mode: 'ok' | 'bad' | 'other-user' = 'ok';
    const tenantId = randomUUID();
    const userId = randomUUID();
    const { client, events } = make({
      getToken: async () => {
        const expiresAt = Math.floor(Date.now() / 1000) + 6;
        if (mode === 'bad') return 'unknown-token';
        return issueToken(verifier, { tenantId, userId: mode === 'other-user' ? randomUUID() : userId, expiresAt }).token;
      },
    });
    await client.connect();
    mode = 'bad';
    expect(await events.next('error')).toMatchObject({ code: 'invalid_or_missing_token', details: { frame: 'auth' } });
    mode = 'ok';
    verifier.unavailable = true;
    expect(await events.next('error', (e) => e.code !== 'invalid_or_missing_token')).toMatchObject({ code: 'auth_unavailable', details: { frame: 'auth' } });
    verifier.unavailable = false;
    mode = 'other-user';
    expect(await events.next('error', (e) => e.code === 'identity_mismatch', 6000)).toMatchObject({ details: { frame: 'auth' } });
    expect(events.all('ready')).toHaveLength(1);
  });

  it('a wrong URL gives up with not_found; a failing getToken is reported and retried', async () => {
    const wrong = make({ url: rt.ws.replace(/\/ws$/, '/nope') });
    const connecting = wrong.client.connect();
    expect(await codeOf(connecting)).toBe('not_found');
    expect(wrong.client.state).toBe('closed');

    let calls = 0;
    const identity = { tenantId: randomUUID() };
    const flaky = make({
      getToken: async () => {
        if (calls++ === 0) throw new Error('host busy');
        return issueToken(verifier, identity).token;
      },
    });
    const ready = flaky.client.connect();
    expect(await flaky.events.next('error')).toMatchObject({ code: 'token_provider_failed' });
    await ready;
  });

  it('every server error code an error frame can carry rejects the request with that code; an unknown code is internal', async () => {
    const codes = [...SERVER_ERROR_CODES, 'a_code_from_the_future'];
    const s = await stub((peer) => {
      peer.send(readyFrame());
      peer.ws.on('message', (d) => {
        const f = JSON.parse(String(d)) as { type: string; ref?: string; data?: number };
        if (f.type === 'publish') peer.send({ type: 'error', code: codes[f.data!], ref: f.ref, limit: 7, retry_after_ms: 1500 });
      });
    });
    const { client } = make({ url: s.url });
    for (let i = 0; i < codes.length; i++) {
      const err = (await client.publish('any', i).catch((e: unknown) => e)) as RelayClientError;
      expect(err).toBeInstanceOf(RelayClientError);
      expect(err.code).toBe(i < SERVER_ERROR_CODES.length ? codes[i] : 'internal');
      expect(err.details).toMatchObject({ serverCode: codes[i], limit: 7, retryAfterMs: 1500 });
    }
  });

  it('timeout, connection_lost, closed, protocol_error and an error frame nobody asked for', async () => {
    const s = await stub((peer, index) => {
      peer.send(readyFrame());
      peer.ws.on('message', (d) => {
        const f = JSON.parse(String(d)) as { type: string; data?: string };
        // "silent": never answered; "drop": the connection ends before the answer.
        if (f.type === 'publish' && f.data === 'drop' && index === 0) peer.ws.terminate();
        if (f.type === 'publish' && f.data === 'garbage') {
          peer.send('not json');
          peer.send({ type: 'error', code: 'internal' });
        }
      });
    });
    const { client, events } = make({ url: s.url, requestTimeoutMs: 200 });
    await client.connect();
    const silent = (await client.publish('x', 'silent').catch((e: unknown) => e)) as RelayClientError;
    expect(silent.code).toBe('timeout');
    expect(silent.details.sent).toBe(true);
    // Without an idempotency key the client cannot know whether to resend: connection_lost.
    expect(await codeOf(client.publish('x', 'drop', { idempotencyKey: false }))).toBe('connection_lost');
    await events.next('ready', (r) => r.reconnected);
    void client.publish('x', 'garbage').catch(() => {});
    expect(await events.next('error')).toMatchObject({ code: 'protocol_error' });
    expect(await events.next('error')).toMatchObject({ code: 'internal' });
    const pending = client.publish('x', 'silent');
    client.close();
    expect(await codeOf(pending)).toBe('closed');
    expect(await codeOf(client.subscribe('x'))).toBe('closed');

    // Never connected (the server is gone): the timeout says the frame never left.
    const url = s.url;
    await s.stop();
    stubs.splice(stubs.indexOf(s), 1);
    const unsent = createRelayClient({ url, WebSocket, getToken: async () => 't', requestTimeoutMs: 100, reconnect: { initialDelayMs: 1000 } });
    clients.push(unsent);
    const never = (await unsent.publish('x', 1).catch((e: unknown) => e)) as RelayClientError;
    expect(never).toMatchObject({ code: 'timeout', details: { sent: false } });
  });
});
