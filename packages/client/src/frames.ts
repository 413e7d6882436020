import { RelayClientError } from './client-error.js';

/** JSON as it travels in `data`. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export type Ref = string | number;

/** A presence member: the user and the `member` object it subscribed with. */
export interface PresenceMember {
  user_id: string;
  data?: JsonValue;
}

/** Frames realtime sends (docs/PROTOCOL.md "Server → client"). Members the client does not read are omitted. */
export type ServerFrame =
  | { type: 'ready'; tenant_id: string; user_id: string; expires_at: number }
  | { type: 'subscribed'; topic: string; epoch: string; recovered?: boolean; reason?: RecoveryReason; ref?: Ref }
  | { type: 'unsubscribed'; topic: string; ref?: Ref }
  | { type: 'published'; topic: string; id: string; ref?: Ref }
  | { type: 'authenticated'; expires_at: number; ref?: Ref }
  | { type: 'message'; topic: string; id: string; user_id: string | null; from?: string; data: JsonValue; created_at: string }
  | { type: 'error'; code: string; ref?: Ref }
  | { type: 'pong'; ref?: Ref }
  | { type: 'presence'; topic: string; members: PresenceMember[]; ref?: Ref }
  | { type: 'join'; topic: string; member: PresenceMember }
  | { type: 'leave'; topic: string; member: PresenceMember }
  | { type: 'batch'; topic?: string; frames: unknown[] };

export type RecoveryReason = 'history_lost' | 'too_old';

/** The frame, or undefined when it is not a JSON object with a string `type`. */
export function parseServerFrame(data: unknown): ServerFrame | undefined {
  if (typeof data !== 'string') return undefined;
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v) || typeof (v as { type?: unknown }).type !== 'string') return undefined;
  return v as ServerFrame;
}

const TOPIC_SHAPE = /^tenants\/([^/]+)\/channels\/([^/]+)$/;

export function topicOf(tenantId: string, channel: string): string {
  return `tenants/${tenantId}/channels/${channel}`;
}

/** The channel of a `tenants/{t}/channels/{c}` topic (the topic itself if it has another shape). */
export function channelOf(topic: string): string {
  return TOPIC_SHAPE.exec(topic)?.[2] ?? topic;
}

/**
 * The frames of a `batch`, in order, each to be handled as if it had come
 * alone; what is not a frame becomes a `protocol_error`. A compact batch
 * (`batch=2`) names one topic, and its messages of that topic come as their
 * members after `topic` only.
 */
export function unbatch(frame: Extract<ServerFrame, { type: 'batch' }>): (ServerFrame | RelayClientError)[] {
  if (!Array.isArray(frame.frames)) return [new RelayClientError('protocol_error', 'a batch frame without a frames array')];
  const topic = typeof frame.topic === 'string' ? frame.topic : undefined;
  return frame.frames.map((inner) => {
    if (typeof inner !== 'object' || inner === null || Array.isArray(inner)) return new RelayClientError('protocol_error', 'a batch frame holding something other than frames');
    const type = (inner as { type?: unknown }).type;
    if (type === undefined && topic !== undefined) return { ...(inner as object), type: 'message', topic } as ServerFrame;
    if (typeof type !== 'string' || type === 'batch') return new RelayClientError('protocol_error', 'a batch frame holding something other than frames');
    return inner as ServerFrame;
  });
}
