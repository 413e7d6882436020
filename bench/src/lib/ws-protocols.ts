import type WebSocket from 'ws';

/**
 * The three WebSocket servers the fan-out and connection rows compare, seen
 * from a client: ours (contract frames, bearer token), the bare ws baseline
 * (the same frames, no auth) and socket.io (engine.io v4 packets over a raw ws
 * client, so every variant costs the client processes the same), and two
 * peers spoken minimally over the same client: nats-server (the NATS text
 * protocol) and mosquitto (MQTT 3.1.1, QoS 0), both over WebSocket.
 * `relay` and `wsBatch` ask for compact batch frames (`?batch=2`, as the
 * client SDK does); `relayPlain` and `ws` get one frame per message.
 */
export type Variant = 'relay' | 'relayPlain' | 'ws' | 'wsBatch' | 'socketio' | 'nats' | 'mqtt';

/** How far a connection gets before it counts as connected. */
export type Level = 'open' | 'ready' | 'subscribed';

export interface ClientProtocol {
  url(base: string): string;
  headers(token: string | undefined): Record<string, string>;
  /** WebSocket subprotocols to offer (MQTT over WebSocket needs `mqtt`). */
  protocols?: string[];
  /** Resolves when the connection reached `level` (topic needed for 'subscribed'). */
  handshake(ws: WebSocket, level: Level, topic: string | undefined): Promise<void>;
  publishFrame(topic: string, data: unknown): string | Buffer;
  /** True for a delivered message (the publisher parses only its own echoes). */
  isMessage(text: string): boolean;
  /** Answers protocol-level keepalives that are data frames (socket.io); true when it did. */
  keepalive(ws: WebSocket, text: string): boolean;
  /**
   * For protocols whose server may put several messages in one WebSocket
   * frame (or split one over two): a per-socket counter of the deliveries in
   * each frame, which also answers keepalives. Absent: one frame is one message.
   */
  counter?(ws: WebSocket): (data: Buffer) => number;
}

function waitFor(ws: WebSocket, match: (text: string, data: Buffer) => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), timeoutMs);
    const onMessage = (data: Buffer) => {
      if (match(data.toString(), data)) finish();
    };
    const onClose = (code: number) => finish(new Error(`closed (${code}) while waiting for ${what}`));
    const finish = (err?: Error) => {
      clearTimeout(timer);
      ws.off('message', onMessage);
      ws.off('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    ws.on('message', onMessage);
    ws.on('close', onClose);
  });
}

const isType = (type: string) => (text: string) => text.includes(`"type":"${type}"`);

const contractFrames = (needsReady: boolean, path: string, batching = false): ClientProtocol => ({
  url: (base) => `${base}${path}${batching ? '?batch=2' : ''}`,
  headers: (token): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {}),
  async handshake(ws, level, topic) {
    // Listen before the upgrade finishes: ours sends `ready` right after it.
    const ready = needsReady && level !== 'open' ? waitFor(ws, isType('ready'), 'ready') : Promise.resolve();
    // A connection refused before it opens rejects below; this wait must not become an unhandled rejection then.
    ready.catch(() => {});
    await new Promise<void>((resolve, reject) => {
      if (ws.readyState === ws.OPEN) return resolve();
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    await ready;
    if (level === 'subscribed') {
      const subscribed = waitFor(ws, isType('subscribed'), 'subscribed');
      ws.send(JSON.stringify({ type: 'subscribe', topic }));
      await subscribed;
    }
  },
  publishFrame: (topic, data) => JSON.stringify({ type: 'publish', topic, data }),
  isMessage: isType('message'),
  keepalive: () => false,
  // With compact batch frames (`?batch=2`) one frame may carry several
  // messages; plain frames are counted the same way, so every contract
  // variant costs its client the same scan of each frame.
  counter: () => countMessages,
});

/**
 * The one member every message has whole or compact (a compact batch's
 * messages have no `type`), and no other frame has: one scan of the frame,
 * which the subscriber processes pay on the same two cores as the server.
 */
const MESSAGE = Buffer.from('"created_at":"');

/** `message` objects in a frame (one, or several inside a `batch`, compact or not); bench payloads never contain the marker. */
export function countMessages(data: Buffer): number {
  let n = 0;
  for (let i = data.indexOf(MESSAGE); i !== -1; i = data.indexOf(MESSAGE, i + MESSAGE.length)) n += 1;
  return n;
}

const socketIo: ClientProtocol = {
  url: (base) => `${base}/socket.io/?EIO=4&transport=websocket`,
  headers: () => ({}),
  async handshake(ws, level, topic) {
    const opened = waitFor(ws, (t) => t.startsWith('0{'), 'engine.io open');
    await opened;
    if (level === 'open') return;
    const connected = waitFor(ws, (t) => t.startsWith('40'), 'socket.io connect');
    ws.send('40');
    await connected;
    if (level === 'subscribed') {
      const subscribed = waitFor(ws, (t) => t.startsWith('42["subscribed"'), 'subscribed');
      ws.send(`42${JSON.stringify(['subscribe', topic])}`);
      await subscribed;
    }
  },
  publishFrame: (topic, data) => `42${JSON.stringify(['publish', { topic, data }])}`,
  isMessage: (t) => t.startsWith('42["message"'),
  keepalive(ws, text) {
    if (text !== '2') return false;
    ws.send('3');
    return true;
  },
};

function opened(ws: WebSocket): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (ws.readyState === ws.OPEN) return resolve();
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
}

/** NATS subjects are dot-separated: the contract topic's slashes become dots. */
const natsSubject = (topic: string) => topic.replaceAll('/', '.');
const MSG = Buffer.from('MSG ');
const PING = Buffer.from('PING\r\n');

function countMsg(buf: Buffer): number {
  let n = 0;
  for (let i = buf.indexOf(MSG); i !== -1; i = buf.indexOf(MSG, i + 4)) n += 1;
  return n;
}

/**
 * NATS text protocol: INFO, then CONNECT (+ SUB) + PING answered by PONG, as
 * a real client connects. nats-server packs several MSGs into one frame, so
 * deliveries are counted as "MSG " occurrences (the payload is all 'x'),
 * including one that straddles two frames.
 */
const natsText: ClientProtocol = {
  url: (base) => base,
  headers: () => ({}),
  async handshake(ws, level, topic) {
    const info = waitFor(ws, (t) => t.startsWith('INFO '), 'INFO');
    await opened(ws);
    await info;
    const pong = waitFor(ws, (t) => t.includes('PONG\r\n'), 'PONG');
    const sub = level === 'subscribed' ? `SUB ${natsSubject(topic!)} 1\r\n` : '';
    ws.send(`CONNECT {"verbose":false,"pedantic":false,"protocol":1,"echo":true}\r\n${sub}PING\r\n`);
    await pong;
  },
  publishFrame: (topic, data) => {
    const payload = String(data);
    return `PUB ${natsSubject(topic)} ${Buffer.byteLength(payload)}\r\n${payload}\r\n`;
  },
  isMessage: (t) => t.includes('MSG '),
  keepalive(ws, text) {
    if (!text.startsWith('PING')) return false;
    ws.send('PONG\r\n');
    return true;
  },
  counter(ws) {
    let tail = Buffer.alloc(0);
    return (data) => {
      let n = countMsg(data);
      if (tail.length > 0) n += countMsg(Buffer.concat([tail, data.subarray(0, 3)]));
      tail = Buffer.from(data.subarray(Math.max(0, data.length - 3)));
      if (data.indexOf(PING) !== -1) ws.send('PONG\r\n');
      return n;
    };
  },
};

function remainingLength(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return out;
}

const mqttString = (s: string): Buffer => {
  const b = Buffer.from(s);
  return Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
};
const mqttPacket = (first: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([first, ...remainingLength(body.length)]), body]);
let mqttClients = 0;

/**
 * MQTT 3.1.1 over WebSocket (subprotocol `mqtt`), QoS 0, clean session, no
 * keepalive (so no PINGREQ). Deliveries are PUBLISH packets, counted by
 * walking the packet headers across frames.
 */
const mqtt311: ClientProtocol = {
  url: (base) => base,
  headers: () => ({}),
  protocols: ['mqtt'],
  async handshake(ws, level, topic) {
    await opened(ws);
    const connack = waitFor(ws, (_t, d) => d[0] === 0x20, 'CONNACK');
    // Protocol name, level 4, clean session, keepalive 0, then the client id.
    const variable = Buffer.concat([mqttString('MQTT'), Buffer.from([4, 0x02, 0, 0]), mqttString(`bench-${process.pid}-${mqttClients++}`)]);
    ws.send(mqttPacket(0x10, variable));
    await connack;
    if (level === 'subscribed') {
      const suback = waitFor(ws, (_t, d) => d[0] === 0x90, 'SUBACK');
      ws.send(mqttPacket(0x82, Buffer.concat([Buffer.from([0, 1]), mqttString(topic!), Buffer.from([0])])));
      await suback;
    }
  },
  publishFrame: (topic, data) => mqttPacket(0x30, Buffer.concat([mqttString(topic), Buffer.from(String(data))])),
  isMessage: () => false,
  keepalive: () => false,
  counter() {
    let pending: Buffer | undefined;
    return (data) => {
      const buf = pending ? Buffer.concat([pending, data]) : data;
      pending = undefined;
      let n = 0;
      let at = 0;
      while (at < buf.length) {
        let len = 0;
        let mul = 1;
        let i = at + 1;
        let complete = false;
        while (i < buf.length && i < at + 5) {
          const b = buf[i++]!;
          len += (b & 0x7f) * mul;
          mul *= 128;
          if ((b & 0x80) === 0) {
            complete = true;
            break;
          }
        }
        if (!complete || i + len > buf.length) break;
        if (buf[at]! >> 4 === 3) n += 1;
        at = i + len;
      }
      if (at < buf.length) pending = Buffer.from(buf.subarray(at));
      return n;
    };
  },
};

export const PROTOCOLS: Record<Variant, ClientProtocol> = {
  relay: contractFrames(true, '/ws', true),
  relayPlain: contractFrames(true, '/ws'),
  ws: contractFrames(false, '/'),
  wsBatch: contractFrames(false, '/', true),
  socketio: socketIo,
  nats: natsText,
  mqtt: mqtt311,
};
