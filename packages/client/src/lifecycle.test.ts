import { mkdtempSync, rmSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
import { createRelayClient, type RelayClient, type RelayClientOptions } from './index.js';
import { EventRecorder } from './testing/event-recorder.js';
import { readyFrame, StubRelay } from './testing/stub-relay.js';

// The client's life across refreshes, drops and closes, against real realtime
// instances (embedded history); a scripted stub only where realtime cannot be
// made to misbehave.
describe('RelayClient: refresh, reconnect and close codes', () => {
  const verifier = new FakeVerifier();
  const historyDir = mkdtempSync(join(tmpdir(), 'relay-client-history-'));
  let rt: RealtimeInstance;
  const clients: RelayClient[] = [];
  const stubs: StubRelay[] = [];

  const make = (opts: Partial<RelayClientOptions> & { tenantId?: string; userId?: string; lifetimeS?: number } = {}) => {
    const tenantId = opts.tenantId ?? randomUUID();
    const userId = opts.userId ?? randomUUID();
    const lifetimeS = opts.lifetimeS ?? 3600;
    let tokens = 0;
    const client = createRelayClient({
      url: rt.ws,
      WebSocket,
      getToken: async () => {
        tokens++;
        return issueToken(verifier, { tenantId, userId, expiresAt: Math.floor(Date.now() / 1000) + lifetimeS }).token;
      },
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      ...opts,
    });
    clients.push(client);
    return { client, events: new EventRecorder(client), tenantId, userId, tokens: () => tokens };
  };

  const restart = async (): Promise<void> => {
    const port = rt.server.port;
    await rt.stop();
    rt = await startRealtime({ verifier, env: { REALTIME_PORT: String(port), HISTORY_DIR: historyDir } });
  };

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier, env: { HISTORY_DIR: historyDir } });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await Promise.all(stubs.splice(0).map((s) => s.stop()));
    verifier.unavailable = false;
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
    rmSync(historyDir, { recursive: true, force: true });
  });

  it('refreshes a short-lived token on the live connection: it stays up past the first token expiry', async () => {
    const { client, events } = make({ lifetimeS: 3 });
    await client.connect();
    const firstExpiry = client.user!.expiresAt;
    await client.subscribe('refresh');
    // Refreshes come every ~1.5 s; a bounded number of them carries us past the first expiry.
    for (let i = 0; i < 6 && Date.now() <= firstExpiry * 1000 + 500; i++) {
      const refreshed = await events.next('token_refreshed', () => true, 5000);
      expect(refreshed.expiresAt).toBeGreaterThanOrEqual(firstExpiry);
    }
    expect(Date.now()).toBeGreaterThan(firstExpiry * 1000 + 500);
    expect(client.state).toBe('open');
    expect(events.all('disconnected')).toEqual([]);
    expect(events.all('ready')).toHaveLength(1);
    // Still the same connection, still subscribed.
    const { id } = await client.publish('refresh', 'after expiry');
    expect((await events.messages('refresh', 1)).map((m) => m.id)).toEqual([id]);
  });

  it('1001 (the instance stops) and back on the same port: reconnects, resubscribes with after, nothing missed or doubled', async () => {
    const { client, events } = make();
    await client.subscribe('restart');
    const before = [await client.publish('restart', 1), await client.publish('restart', 2)];
    await events.messages('restart', 2);
    const dropped = events.next('disconnected');
    const stopping = restart();
    expect(await dropped).toMatchObject({ code: 1001, willReconnect: true });
    await stopping;
    const again = await events.next('subscribed', (s) => s.resubscribed, 10_000);
    // A clean stop keeps the epoch: everything after `after` is there.
    expect(again).toMatchObject({ channel: 'restart', recovered: true });
    expect(events.all('gap')).toEqual([]);
    const after = await client.publish('restart', 3);
    const ids = (await events.messages('restart', 3)).map((m) => m.id);
    expect(ids).toEqual([...before.map((b) => b.id), after.id]);
    expect(events.all('ready').map((r) => r.reconnected)).toEqual([false, true]);
  });

  it('1013 (the token could not be re-checked) reconnects after a backoff once the verifier answers again', async () => {
    const { client, events } = make();
    await client.subscribe('busy');
    verifier.unavailable = true;
    const dropped = events.next('disconnected');
    await rt.feed.reset();
    expect(await dropped).toMatchObject({ code: 1013, willReconnect: true });
    // Upgrades are refused 503 meanwhile; the client keeps trying.
    const refused = await events.next('disconnected', (d) => d.code !== 1013);
    expect(refused.willReconnect).toBe(true);
    verifier.unavailable = false;
    await events.next('subscribed', (s) => s.resubscribed, 10_000);
    expect(client.state).toBe('open');
  });

  it('4401 (revoked) with a fresh token that works: reconnects with it', async () => {
    const { client, events, tenantId, tokens } = make();
    await client.subscribe('revoked');
    const dropped = events.next('disconnected');
    await rt.feed.push({ tenant_id: tenantId, kind: 'disabled', version: 2, revoked_key_versions: [] });
    expect(await dropped).toMatchObject({ code: 4401, willReconnect: true });
    await events.next('subscribed', (s) => s.resubscribed);
    expect(tokens()).toBe(2);
  });

  it('4401 and the fresh token is refused (401 at the upgrade): gives up with invalid_or_missing_token', async () => {
    const tenantId = randomUUID();
    let first = true;
    const { client, events } = make({
      tenantId,
      getToken: async () => {
        if (first) {
          first = false;
          return issueToken(verifier, { tenantId }).token;
        }
        return 'a-token-the-verifier-does-not-know';
      },
    });
    await client.subscribe('revoked');
    await rt.feed.push({ tenant_id: tenantId, kind: 'disabled', version: 2, revoked_key_versions: [] });
    const error = await events.next('error');
    expect(error).toMatchObject({ code: 'invalid_or_missing_token' });
    expect(client.state).toBe('closed');
    expect(events.all('disconnected').map((d) => [d.code, d.willReconnect])).toEqual([
      [4401, true],
      [1006, false],
    ]);
    await expect(client.publish('revoked', 1)).rejects.toMatchObject({ code: 'closed' });
  });

  it('4401 and the host cannot give a new token: gives up with token_provider_failed', async () => {
    let calls = 0;
    const tenantId = randomUUID();
    const { client, events } = make({
      tenantId,
      getToken: async () => {
        if (calls++ === 0) return issueToken(verifier, { tenantId }).token;
        throw new Error('host down');
      },
    });
    await client.connect();
    await rt.feed.push({ tenant_id: tenantId, kind: 'revoked_all', version: 2, revoked_key_versions: [] });
    expect(await events.next('error')).toMatchObject({ code: 'token_provider_failed' });
    expect(client.state).toBe('closed');
  });

  it('4409 from realtime (the host disconnected the user): never reconnects, other users stay', async () => {
    const tenantId = randomUUID();
    const userId = randomUUID();
    const { client, events } = make({ tenantId, userId });
    const bystander = make({ tenantId });
    await client.subscribe('room');
    await bystander.client.subscribe('room');
    await rt.feed.push({ tenant_id: tenantId, kind: 'user_disconnected', version: 2, revoked_key_versions: [], detail: { user_id: userId } });
    expect(await events.next('disconnected')).toMatchObject({ code: 4409, willReconnect: false });
    expect(await events.next('error')).toMatchObject({ code: 'disconnected', details: { closeCode: 4409 } });
    expect(client.state).toBe('closed');
    await expect(client.publish('room', 1)).rejects.toMatchObject({ code: 'closed' });
    const { id } = await bystander.client.publish('room', 'still here');
    expect((await bystander.events.messages('room', 1)).map((m) => m.id)).toEqual([id]);
  });

  it('4409 (scripted): a subscribe waiting when it comes is rejected, and nothing reconnects', async () => {
    const stub = await StubRelay.start((peer) => {
      peer.send(readyFrame());
      void peer.next('subscribe').then(() => peer.ws.close(4409, 'disconnected by the host'));
    });
    stubs.push(stub);
    const { client, events } = make({ url: stub.url });
    const subscribing = client.subscribe('x');
    expect(await events.next('disconnected')).toMatchObject({ code: 4409, willReconnect: false });
    expect(await events.next('error')).toMatchObject({ code: 'disconnected', details: { closeCode: 4409 } });
    await expect(subscribing).rejects.toMatchObject({ code: 'disconnected' });
    expect(client.state).toBe('closed');
    expect(stub.peers).toHaveLength(1);
  });

  it("4429 (the tenant's connection cap): reconnects, but not before the server's retry_after_ms", async () => {
    const capped = await startRealtime({ verifier, env: { MAX_CONNECTIONS_PER_TENANT: '1' } });
    const tenantId = randomUUID();
    const holder = createRelayClient({ url: capped.ws, WebSocket, getToken: async () => issueToken(verifier, { tenantId }).token });
    clients.push(holder);
    try {
      await holder.connect();
      const { client, events } = make({ url: capped.ws, tenantId });
      void client.connect().catch(() => {});
      expect(await events.next('error')).toMatchObject({ code: 'too_many_connections', details: { limit: 1, retryAfterMs: 5000 } });
      const dropped = await events.next('disconnected');
      expect(dropped).toMatchObject({ code: 4429, willReconnect: true });
      expect(dropped.delayMs).toBeGreaterThanOrEqual(5000);
      client.close();
    } finally {
      holder.close();
      await capped.stop();
    }
  });

  it('a connection that stops answering is noticed by the ping and replaced', async () => {
    // The first connection never answers a ping; the second is a healthy one.
    const stub = await StubRelay.start((peer, index) => {
      peer.send(readyFrame());
      if (index > 0) peer.ws.on('message', (d) => {
        const f = JSON.parse(d.toString()) as { type: string; ref?: string };
        if (f.type === 'ping') peer.send({ type: 'pong', ref: f.ref });
      });
    });
    stubs.push(stub);
    const { client, events } = make({ url: stub.url, pingIntervalMs: 50, pingTimeoutMs: 100 });
    await client.connect();
    expect(await events.next('disconnected')).toMatchObject({ code: 1006, reason: 'ping timeout', willReconnect: true });
    await events.next('ready', (r) => r.reconnected);
    const second = await stub.peer(1);
    await second.next('ping');
    await second.next('ping');
    expect(client.state).toBe('open');
  });

  it('a clock ahead of the server by more than the token lifetime does not refresh in a loop', async () => {
    const stub = await StubRelay.start((peer) => {
      peer.send(readyFrame(3600));
      peer.ws.on('message', (d) => {
        const f = JSON.parse(String(d)) as { type: string; ref?: string };
        if (f.type === 'auth') peer.send({ type: 'authenticated', expires_at: Math.floor(Date.now() / 1000) + 3600, ref: f.ref });
      });
    });
    stubs.push(stub);
    const { client } = make({ url: stub.url, now: () => Date.now() + 2 * 3600_000 });
    await client.connect();
    const readyAt = Date.now();
    const peer = await stub.peer(0);
    await peer.next('auth', 10_000);
    // Not at once (this clock says the token expired an hour ago): after the first step of a growing interval.
    expect(Date.now() - readyAt).toBeGreaterThanOrEqual(4500);
    expect(peer.frames.filter((f) => f.type === 'auth')).toHaveLength(1);
  });

  it("a refresh refused rate_limited is sent again no sooner than the answer's retry_after_ms", async () => {
    const stub = await StubRelay.start((peer) => {
      peer.send(readyFrame(6));
      let auths = 0;
      peer.ws.on('message', (d) => {
        const f = JSON.parse(String(d)) as { type: string; ref?: string };
        if (f.type !== 'auth') return;
        if (auths++ === 0) peer.send({ type: 'error', code: 'rate_limited', limit: 10, retry_after_ms: 800, ref: f.ref });
        else peer.send({ type: 'authenticated', expires_at: Math.floor(Date.now() / 1000) + 3600, ref: f.ref });
      });
    });
    stubs.push(stub);
    const { client, events } = make({ url: stub.url });
    await client.connect();
    const peer = await stub.peer(0);
    await peer.next('auth', 8000);
    const refusedAt = Date.now();
    expect(await events.next('error')).toMatchObject({ code: 'rate_limited', details: { frame: 'auth', retryAfterMs: 800 } });
    await peer.next('auth', 5000);
    expect(Date.now() - refusedAt).toBeGreaterThanOrEqual(750);
    await events.next('token_refreshed');
  });

  it('pings realtime, which answers pong, and keeps the connection', async () => {
    let notify: () => void = () => {};
    const pongs: Record<string, unknown>[] = [];
    // The ws WebSocket, recording the pong frames the client receives.
    class Recording extends WebSocket {
      constructor(url: string) {
        super(url);
        this.on('message', (data) => {
          const frame = JSON.parse(String(data)) as Record<string, unknown>;
          if (frame.type !== 'pong') return;
          pongs.push(frame);
          notify();
        });
      }
    }
    const { client, events } = make({ WebSocket: Recording, pingIntervalMs: 30, pingTimeoutMs: 2000 });
    await client.connect();
    for (let i = 0; i < 50 && pongs.length < 3; i++) await new Promise<void>((resolve) => (notify = resolve));
    expect(pongs.length).toBeGreaterThanOrEqual(3);
    expect(pongs[0]).toEqual({ type: 'pong', ref: expect.stringMatching(/^ping/) });
    expect(events.all('disconnected')).toEqual([]);
    expect(client.state).toBe('open');
  });
});
