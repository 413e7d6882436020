import { isServerErrorCode, RelayClientError } from './client-error.js';
import type { JsonValue, RecoveryReason } from './frames.js';
import type { HistoryOptions, HistoryPage, RelayMessage } from './types.js';

/** `ws://host:8080/ws` → `http://host:8080` (the gateway serves REST and WebSocket on one origin). */
export function restBaseOf(wsUrl: string): string {
  const u = new URL(wsUrl);
  u.protocol = u.protocol === 'wss:' ? 'https:' : u.protocol === 'ws:' ? 'http:' : u.protocol;
  u.search = '';
  u.hash = '';
  u.pathname = u.pathname.replace(/\/ws\/?$/, '') || '/';
  return u.toString().replace(/\/+$/, '');
}

interface WireMessage {
  id: string;
  channel?: string;
  user_id: string | null;
  from?: string;
  data: JsonValue;
  created_at: string;
}

/** GET {base}/api/v1/channels/{channel}/messages (docs/API.md "Tenant REST API", "Epochs and recovery"). */
export async function fetchHistory(o: { base: string; token: string; tenantId: string; channel: string; fetch: typeof fetch; timeoutMs: number }, opts: HistoryOptions): Promise<HistoryPage> {
  const query = new URLSearchParams();
  if (opts.after !== undefined) query.set('after', opts.after);
  if (opts.after !== undefined && opts.epoch !== undefined && opts.epoch !== '') query.set('epoch', opts.epoch);
  if (opts.limit !== undefined) query.set('limit', String(opts.limit));
  const qs = query.toString();
  const url = `${o.base}/api/v1/channels/${encodeURIComponent(o.channel)}/messages${qs ? `?${qs}` : ''}`;
  const context = { frame: 'history', topic: o.channel };
  let res: Response;
  let body: unknown;
  try {
    res = await o.fetch(url, { headers: { authorization: `Bearer ${o.token}`, accept: 'application/json' }, signal: AbortSignal.timeout(o.timeoutMs) });
    body = await res.json().catch(() => undefined);
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
    throw new RelayClientError(timedOut ? 'timeout' : 'connection_lost', timedOut ? `no history answer within ${o.timeoutMs} ms` : 'history request failed: relay unreachable', { ...context, cause: err });
  }
  if (!res.ok) {
    const raw = (body as { errors?: unknown[] } | undefined)?.errors?.[0];
    const code = isServerErrorCode(raw) ? raw : 'internal';
    throw new RelayClientError(code, `history of ${o.channel} refused: ${typeof raw === 'string' ? raw : res.status}`, { ...context, ...(typeof raw === 'string' && { serverCode: raw }) });
  }
  const page = body as { messages?: WireMessage[]; epoch?: string; recovered?: boolean; reason?: RecoveryReason } | undefined;
  if (!page || !Array.isArray(page.messages)) throw new RelayClientError('protocol_error', 'a history answer without messages', context);
  const topic = `tenants/${o.tenantId}/channels/${o.channel}`;
  return {
    channel: o.channel,
    messages: page.messages.map((m): RelayMessage => ({ channel: o.channel, topic, id: m.id, userId: m.user_id, from: m.from === 'server' || m.user_id === null ? 'server' : 'user', data: m.data, createdAt: m.created_at })),
    epoch: page.epoch ?? '',
    ...(page.recovered !== undefined && { recovered: page.recovered }),
    ...(page.reason !== undefined && { reason: page.reason }),
  };
}

/** The `tenant_id` claim of a token (for topics before the first `ready`); undefined when unreadable. */
export function tenantOfToken(token: string): string | undefined {
  try {
    const seg = token.split('.')[1] ?? '';
    const json = atob(seg.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (seg.length % 4)) % 4));
    const claims = JSON.parse(json) as { tenant_id?: unknown };
    return typeof claims.tenant_id === 'string' ? claims.tenant_id : undefined;
  } catch {
    return undefined;
  }
}
