import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { deleteRedisPrefix, FakeVerifier, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayHeaders, issueToken, startRealtime, TEST_INTERNAL_TOKEN, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient, type Frame } from '../test-support/ws-test-client';
import { ghostBoundMs, sweepIntervalMs } from './presence-store';

const TTL_MS = 1500;
/** Room for a loaded machine on top of the documented bound (timers, Redis round trips, the event's way to the client). */
const SLACK_MS = 1500;
const CHILD = fileURLToPath(new URL('../test-support/realtime-process.ts', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

// One realtime instance in this process, one as a process of its own that is
// SIGKILLed: it can remove nothing, so its members must be swept by the other
// within PRESENCE_TTL_MS + PRESENCE_TTL_MS / 3 (docs/ARCHITECTURE.md "Presence").
describe('presence: a SIGKILLed realtime process leaves no ghost', () => {
  const verifier = new FakeVerifier();
  const prefix = uniqueRedisPrefix('presence-kill');
  const env = { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, PRESENCE_TTL_MS: String(TTL_MS) };
  let live: RealtimeInstance;
  let child: ChildProcess | undefined;
  let childOutput = '';
  let childExited: Promise<void> = Promise.resolve();
  const clients: WsTestClient[] = [];
  const connect = async (url: string, identity: Partial<VerifiedIdentity>) => {
    const { token, identity: id } = issueToken(verifier, identity);
    const c = await WsTestClient.connect(url, token);
    clients.push(c);
    return { c, id };
  };
  const event = (type: 'join' | 'leave', userId: string) => (f: Frame) => f.type === type && (f.member as { user_id: string }).user_id === userId;

  beforeAll(async () => {
    await verifier.start();
    live = await startRealtime({ verifier, env });
  });
  afterAll(async () => {
    // Only the process this test started, by its pid.
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await childExited;
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await live.stop();
    await verifier.stop();
    await deleteRedisPrefix(prefix);
  });

  it('its members leave the other instance\u2019s list, with a leave event, within the bound; a user also connected elsewhere stays', async () => {
    const port = await freePort();
    const proc = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env, REALTIME_PORT: String(port), REALTIME_OPS_PORT: '0', VERIFIER_ADDR: verifier.address, INTERNAL_TOKEN: TEST_INTERNAL_TOKEN, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    childExited = new Promise((resolve) => proc.once('close', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the realtime process did not start within 30 s:\n${childOutput.slice(-2000)}`)), 30_000);
      const onData = (d: Buffer) => {
        childOutput += d.toString();
        if (childOutput.includes('realtime listening')) {
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      proc.once('close', (code) => {
        clearTimeout(timer);
        reject(new Error(`the realtime process exited (${code}):\n${childOutput.slice(-2000)}`));
      });
    });
    const doomedWs = `ws://127.0.0.1:${port}/ws`;

    const tenantId = randomUUID();
    const channel = 'presence:kill';
    const topic = topicFor(tenantId, channel);
    const { c: watcher, id: watcherId } = await connect(live.ws, { tenantId });
    await watcher.request({ type: 'subscribe', topic });
    const ghostId = randomUUID();
    const bothId = randomUUID();
    const { c: ghost } = await connect(doomedWs, { tenantId, userId: ghostId });
    const { c: bothThere } = await connect(doomedWs, { tenantId, userId: bothId });
    const { c: bothHere } = await connect(live.ws, { tenantId, userId: bothId });
    expect(await ghost.request({ type: 'subscribe', topic, member: { n: 1 } })).toMatchObject({ type: 'subscribed' });
    await bothThere.request({ type: 'subscribe', topic });
    await bothHere.request({ type: 'subscribe', topic });
    await watcher.next(event('join', ghostId));
    await watcher.next(event('join', bothId));
    const list = async () => {
      const res = await fetch(`${live.http}/api/v1/channels/${channel}/presence`, { headers: gatewayHeaders(watcherId) });
      expect(res.status).toBe(200);
      return ((await res.json()) as { members: { user_id: string }[] }).members.map((m) => m.user_id);
    };
    expect(await list()).toEqual([watcherId.userId, ghostId, bothId].sort());

    const killedAt = Date.now();
    proc.kill('SIGKILL');
    const bound = ghostBoundMs(TTL_MS);
    const leave = await watcher.next(event('leave', ghostId), bound + SLACK_MS + 5000);
    const elapsed = Date.now() - killedAt;
    expect(leave).toEqual({ type: 'leave', topic, member: { user_id: ghostId } });
    expect(await list()).toEqual([watcherId.userId, bothId].sort());
    console.log(`[presence] SIGKILLed instance's member left after ${elapsed} ms (bound ${bound} ms = PRESENCE_TTL_MS ${TTL_MS} + sweep ${sweepIntervalMs(TTL_MS)})`);
    expect(elapsed).toBeLessThanOrEqual(bound + SLACK_MS);
    // Not before its last beat could have gone stale: it was the sweep, not anything else, that removed them.
    expect(elapsed).toBeGreaterThanOrEqual(TTL_MS - sweepIntervalMs(TTL_MS) - 50);
    // The user still connected here stays, without a leave: a later join comes after any leave the sweep sent.
    const { c: marker, id: markerId } = await connect(live.ws, { tenantId });
    await marker.request({ type: 'subscribe', topic });
    await watcher.next(event('join', markerId.userId));
    expect(watcher.frames.some(event('leave', bothId))).toBe(false);
    expect(await list()).toEqual([watcherId.userId, bothId, markerId.userId].sort());
  });
});
