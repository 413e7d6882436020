/**
 * The part of the WHATWG WebSocket API the client uses. Browsers' `WebSocket`,
 * Node 22's global one and the `ws` package's `WebSocket` (Node 20) all fit.
 */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

export const OPEN = 1;

let fallback: unknown;

/** The Node entry (node.ts) sets the `ws` package's WebSocket here when Node has no global one. */
export function setFallbackWebSocket(impl: unknown): void {
  fallback = impl;
}

/** The option, else the global `WebSocket` (browsers, Node 22+), else (Node 20) the `ws` package when it is installed. */
export function resolveWebSocket(option: unknown): WebSocketConstructor {
  const impl = option ?? (globalThis as { WebSocket?: unknown }).WebSocket ?? fallback;
  if (typeof impl !== 'function') {
    throw new TypeError('no WebSocket implementation: on Node 20 install the `ws` package (npm install ws), or pass one: createRelayClient({ WebSocket })');
  }
  return impl as WebSocketConstructor;
}

/**
 * The HTTP status of a refused upgrade when the implementation tells it (`ws`
 * says "Unexpected server response: 401"); browsers never do (undefined).
 */
export function refusalStatus(event: unknown): number | undefined {
  const e = event as { message?: unknown; error?: { message?: unknown } } | null;
  const text = typeof e?.message === 'string' ? e.message : typeof e?.error?.message === 'string' ? e.error.message : '';
  const m = /Unexpected server response: (\d{3})/.exec(text);
  return m ? Number(m[1]) : undefined;
}

/**
 * `wss://host/ws` + `?batch=2&access_token=`: browsers cannot set headers on an
 * upgrade, so every platform uses the query; `batch=2` asks for compact
 * `batch` frames (several frames of one server tick in one WebSocket frame,
 * the messages of one topic without their type and topic), which the client
 * unpacks. A server that predates `batch=2` sends every frame alone.
 */
export function connectUrl(base: string, token: string): string {
  const sep = base.includes('?') ? '&' : '?';
  return `${base}${sep}batch=2&access_token=${encodeURIComponent(token)}`;
}
