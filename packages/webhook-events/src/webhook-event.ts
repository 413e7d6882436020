/**
 * The events a tenant's webhooks may ask for (#32, docs/PROTOCOL.md
 * "Webhooks"). Realtime detects them where the counts change; the registry's
 * sender delivers them.
 */
export const WEBHOOK_EVENT_TYPES = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'user_connected', 'user_disconnected'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export function isWebhookEventType(v: unknown): v is WebhookEventType {
  return typeof v === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(v);
}

/** One detected transition, as realtime writes it (before it has its public id). */
export interface WebhookEventRecord {
  type: WebhookEventType;
  tenantId: string;
  /** The channel (channel and member events). */
  channel?: string;
  /** The user (member and user events). */
  userId?: string;
  /** member_added: the member data JSON of the join, when it had one. */
  dataJson?: string;
  /** When it happened, on the detecting instance's clock (ms since the epoch). */
  ms: number;
}

/**
 * The Redis stream realtime's scripts append to (`XADD` in the same script
 * that changes the count) and the registry's sender reads. Fields: `t` type,
 * `te` tenant, `c` channel, `u` user, `d` member data JSON, `ms` time.
 */
export function webhookStreamKey(prefix: string): string {
  return `${prefix}webhooks:events`;
}

/** A stream entry's fields (a flat [field, value, ...] list) as a record; undefined for anything malformed. */
export function recordOfFields(fields: readonly string[]): WebhookEventRecord | undefined {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
  const type = f.get('t');
  const tenantId = f.get('te');
  const ms = Number(f.get('ms'));
  if (!isWebhookEventType(type) || !tenantId || !Number.isFinite(ms)) return undefined;
  const channel = f.get('c');
  const userId = f.get('u');
  const dataJson = f.get('d');
  return { type, tenantId, ms, ...(channel && { channel }), ...(userId && { userId }), ...(dataJson && { dataJson }) };
}

/** What a presence-shaped store reports as `join` and `leave`, and which event each one is. */
export interface TransitionNames {
  join: WebhookEventType;
  leave: WebhookEventType;
}

/** Where an in-process driver hands each transition (the embedded default's queue, or nothing). */
export type WebhookEventSink = (record: WebhookEventRecord) => void;
