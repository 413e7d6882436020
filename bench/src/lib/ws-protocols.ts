import type WebSocket from 'ws';

/**
 * The three WebSocket servers the fan-out and connection rows compare, seen
 * from a client: ours (contract frames, bearer token), the bare ws baseline
 * (the same frames, no auth) and socket.io (engine.io v4 packets over a raw ws
 * client, so every variant costs the client processes the same).
 */
export type Variant = 'relay' | 'ws' | 'socketio';

/** How far a connection gets before it counts as connected. */
export type Level = 'open' | 'ready' | 'subscribed';

export interface ClientProtocol {
  url(base: string): string;
  headers(token: string | undefined): Record<string, string>;
  /** Resolves when the connection reached `level` (topic needed for 'subscribed'). */
  handshake(ws: WebSocket, level: Level, topic: string | undefined): Promise<void>;
  publishFrame(topic: string, data: unknown): string;
  /** True for a delivered message (the publisher parses only its own echoes). */
  isMessage(text: string): boolean;
  /** Answers protocol-level keepalives that are data frames (socket.io); true when it did. */
  keepalive(ws: WebSocket, text: string): boolean;
}

function waitFor(ws: WebSocket, match: (text: string) => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), timeoutMs);
    const onMessage = (data: Buffer) => {
      if (match(data.toString())) finish();
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

const contractFrames = (needsReady: boolean, path: string): ClientProtocol => ({
  url: (base) => `${base}${path}`,
  headers: (token): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {}),
  async handshake(ws, level, topic) {
    // Listen before the upgrade finishes: ours sends `ready` right after it.
    const ready = needsReady && level !== 'open' ? waitFor(ws, isType('ready'), 'ready') : Promise.resolve();
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
});

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

export const PROTOCOLS: Record<Variant, ClientProtocol> = {
  relay: contractFrames(true, '/ws'),
  ws: contractFrames(false, '/'),
  socketio: socketIo,
};
