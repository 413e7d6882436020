/**
 * A stored message. `dataJson` stays the JSON text it arrived as: it is
 * serialized once at publish and spliced into every frame and response
 * unchanged, so fan-out never re-encodes the payload.
 */
export interface Message {
  /** `<ms>-<seq>`, increasing within a channel (a Redis Stream id in both drivers). */
  id: string;
  channel: string;
  /** The publishing user; SERVER_USER_ID ('') for a message the tenant's host server published. */
  userId: string;
  dataJson: string;
  /** RFC 3339, the id's millisecond part. */
  createdAt: string;
  /** The id's two parts, parsed once so hot paths compare numbers. */
  ms: number;
  seq: number;
}

/** Builds a message from a `<ms>-<seq>` id the store assigned. */
export function makeMessage(id: string, channel: string, userId: string, dataJson: string): Message {
  const dash = id.indexOf('-');
  const ms = Number(id.slice(0, dash));
  return { id, channel, userId, dataJson, createdAt: new Date(ms).toISOString(), ms, seq: Number(id.slice(dash + 1)) };
}

/** True when `m` comes after the position (ms, seq). */
export function isAfter(m: Message, ms: number, seq: number): boolean {
  return m.ms > ms || (m.ms === ms && m.seq > seq);
}

export type MessageListener = (message: Message) => void;

/** Topic of one tenant's channel; the key every driver indexes by. */
export interface ChannelRef {
  tenantId: string;
  channel: string;
}

/**
 * The user id of a message published by the tenant's host server (#13). User
 * ids are UUIDs, so the empty string is no one's; every store keeps it as it
 * keeps any user id (Redis field `u`, the journal's `u`).
 */
export const SERVER_USER_ID = '';

/** `"user_id":…` of a message: a user's id, or `null,"from":"server"` for a server message. */
function sender(m: Message): string {
  return m.userId === SERVER_USER_ID ? '"user_id":null,"from":"server"' : `"user_id":${JSON.stringify(m.userId)}`;
}

/** The contract's message object: {"id","channel","user_id","data","created_at"}, plus `"from":"server"` for a server message. */
export function messageJson(m: Message): string {
  return `{"id":"${m.id}","channel":${JSON.stringify(m.channel)},${sender(m)},"data":${m.dataJson},"created_at":"${m.createdAt}"}`;
}

/** The WebSocket `message` frame for a topic. */
export function messageFrame(topic: string, m: Message): string {
  return `{"type":"message","topic":${JSON.stringify(topic)},"id":"${m.id}",${sender(m)},"data":${m.dataJson},"created_at":"${m.createdAt}"}`;
}
