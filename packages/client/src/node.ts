// The Node entry (`exports` condition "node"): the same API, and on Node 20,
// which has no global WebSocket, the optional peer dependency `ws` is used
// when it is installed, so `createRelayClient({ url, getToken })` works as in
// a browser. Node 22+ uses its global WebSocket. No top-level await, so a
// CommonJS app on Node 20.19+ can require() it too.
import { setFallbackWebSocket } from './socket.js';

type Require = (id: string) => unknown;
const nodeProcess = (globalThis as { process?: { getBuiltinModule?: (id: string) => { createRequire(url: string): Require } | undefined } }).process;

if (typeof (globalThis as { WebSocket?: unknown }).WebSocket !== 'function') {
  try {
    const require = nodeProcess?.getBuiltinModule?.('node:module')?.createRequire(import.meta.url);
    const ws = require?.('ws') as { WebSocket?: unknown } | undefined;
    setFallbackWebSocket(ws?.WebSocket);
  } catch {
    // Not installed: createRelayClient asks for a WebSocket, naming `ws`.
  }
}

export * from './index.js';
