import { randomUUID } from 'node:crypto';
import { signToken } from '@service-relay/testkit';
import { WebSocket } from 'ws';

/**
 * Fan-out load for a whole-stack test, in a process of its own (forked with
 * an IPC channel) so its client work does not slow the measuring test: for
 * each group, SUBSCRIBERS subscribers of one channel (spread over the
 * realtime instances) and a publisher saturating it with a window of its own
 * echoes; optionally a trickle of connections that connect, subscribe to a
 * fresh presence channel and leave (each one makes the six webhook events).
 * Messages: `start`, `count` (answers the delivered counts and the time),
 * `stop` (drains the windows, answers the totals, exits). Bounded: it exits
 * by itself after MAX_MS, and when the test's IPC channel closes.
 */
export interface FanoutLoadConfig {
  wsUrls: string[];
  groups: Array<{ name: string; tenantId: string; secret: string; channel: string }>;
  subscribers: number;
  window: number;
  /** One connect-subscribe-leave every `everyMs` for this tenant, on the instances in turn. */
  churn?: { tenantId: string; secret: string; everyMs: number };
  maxMs: number;
}

export type LoadRequest = { cmd: 'start' } | { cmd: 'count' } | { cmd: 'stop' };
export interface LoadCounts {
  at: number;
  delivered: Record<string, number>;
  sent: Record<string, number>;
  echoed: Record<string, number>;
  /** Presence channels churned so far are `presence:churn-0` … `presence:churn-(churnStarted-1)`. */
  churnStarted: number;
  churned: number;
  churnFailed: number;
}

const config = JSON.parse(process.env.FANOUT_LOAD ?? 'null') as FanoutLoadConfig | null;
if (!config) throw new Error('FANOUT_LOAD is not set');
setTimeout(() => process.exit(3), Math.min(config.maxMs, 120_000)).unref();
process.on('disconnect', () => process.exit(0));

const send = (m: unknown) => process.send!(m);
const topicOf = (tenantId: string, channel: string) => `tenants/${tenantId}/channels/${channel}`;
const token = (tenantId: string, secret: string) => signToken({ secret, tenantId, userId: randomUUID() });

/** A connection after `ready` and, with `topic`, after `subscribed`; `onFrame` sees every later frame as bytes. */
function connect(url: string, bearer: string, topic: string | undefined, onFrame: (data: Buffer) => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${bearer}` }, perMessageDeflate: false });
    const timer = setTimeout(() => fail(new Error('no ready/subscribed within 10 s')), 10_000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      ws.terminate();
      reject(err);
    };
    ws.once('error', fail);
    ws.once('close', (code) => fail(new Error(`closed ${code} before ready`)));
    const setup = (data: Buffer) => {
      const f = JSON.parse(data.toString()) as { type: string; ref?: string };
      if (f.type === 'ready' && topic) ws.send(JSON.stringify({ type: 'subscribe', topic, ref: 's' }));
      else if (f.type === 'ready' || (f.type === 'subscribed' && f.ref === 's')) {
        clearTimeout(timer);
        ws.off('message', setup);
        ws.removeAllListeners('close');
        ws.removeAllListeners('error');
        ws.on('error', () => {});
        ws.on('message', onFrame);
        resolve(ws);
      } else if (f.type === 'error') fail(new Error(`refused: ${data.toString()}`));
    };
    ws.on('message', setup);
  });
}

const delivered: Record<string, number> = {};
const sent: Record<string, number> = {};
const echoed: Record<string, number> = {};
const sockets: WebSocket[] = [];
const pumps: Array<() => void> = [];
let running = false;
let churnStarted = 0;
let churned = 0;
let churnFailed = 0;

for (const [g, group] of config.groups.entries()) {
  delivered[group.name] = 0;
  sent[group.name] = 0;
  echoed[group.name] = 0;
  const topic = topicOf(group.tenantId, group.channel);
  // Subscribers only count frames: on a channel without presence every frame after `subscribed` is a message.
  for (let i = 0; i < config.subscribers; i++) {
    sockets.push(await connect(config.wsUrls[i % config.wsUrls.length]!, token(group.tenantId, group.secret), topic, () => delivered[group.name]!++));
  }
  const frame = JSON.stringify({ type: 'publish', topic, data: 'x'.repeat(100) });
  // Each group's publisher on another instance than the last, so both instances publish and deliver.
  const publisher: WebSocket = await connect(config.wsUrls[g % config.wsUrls.length]!, token(group.tenantId, group.secret), topic, (data) => {
    // Its own echo bounds how far it runs ahead of delivery (the `published` replies are not counted).
    if (data.subarray(0, 20).toString().includes('"message"')) {
      echoed[group.name]!++;
      pump();
    }
  });
  const pump = () => {
    while (running && sent[group.name]! - echoed[group.name]! < config.window && publisher.readyState === publisher.OPEN) {
      publisher.send(frame);
      sent[group.name]!++;
    }
  };
  sockets.push(publisher);
  pumps.push(pump);
}

let churnTimer: NodeJS.Timeout | undefined;
const churnOnce = async (i: number) => {
  const c = config.churn!;
  try {
    const ws = await connect(config.wsUrls[i % config.wsUrls.length]!, token(c.tenantId, c.secret), topicOf(c.tenantId, `presence:churn-${i}`), () => {});
    ws.close();
    churned++;
  } catch {
    churnFailed++;
  }
};

const counts = (): LoadCounts => ({ at: Date.now(), delivered: { ...delivered }, sent: { ...sent }, echoed: { ...echoed }, churnStarted, churned, churnFailed });

process.on('message', (m: LoadRequest) => {
  if (m.cmd === 'start') {
    running = true;
    for (const p of pumps) p();
    if (config.churn) {
      churnTimer = setInterval(() => void churnOnce(churnStarted++), config.churn.everyMs);
    }
    send({ cmd: 'start', ...counts() });
  } else if (m.cmd === 'count') {
    send({ cmd: 'count', ...counts() });
  } else if (m.cmd === 'stop') {
    running = false;
    clearInterval(churnTimer);
    const deadline = Date.now() + 5000;
    // Every publish echoed to its publisher and delivered to every subscriber (or the deadline: the test then sees the shortfall).
    const drained = () => churned + churnFailed === churnStarted && Object.keys(sent).every((k) => echoed[k] === sent[k] && delivered[k]! >= sent[k]! * config.subscribers);
    const finish = () => {
      if (!drained() && Date.now() < deadline) return void setTimeout(finish, 20);
      send({ cmd: 'stop', ...counts() });
      for (const ws of sockets) ws.terminate();
      process.disconnect();
    };
    finish();
  }
});
send({ cmd: 'ready' });
