import { isMessageId } from '../messaging/message-id';
import { EPOCH_SHAPE } from '../messaging/recovery';
import { memberDataJson } from '../presence/presence';

export type Ref = string | number;

/** A client frame whose envelope is well formed; topics are checked later, against the identity. */
export type ClientFrame =
  /** `member`: the presence member data as JSON text (a JSON object of at most 256 bytes), used on presence channels only. */
  | { type: 'subscribe'; topic: unknown; after: string | undefined; epoch: string | undefined; member: string | undefined; ref: Ref | undefined }
  | { type: 'unsubscribe'; topic: unknown; ref: Ref | undefined }
  /** Lists the members of a presence channel. */
  | { type: 'presence'; topic: unknown; ref: Ref | undefined }
  /** The idempotency key is checked by the publish rule. */
  | { type: 'publish'; topic: unknown; data: unknown; idempotencyKey: unknown; ref: Ref | undefined }
  | { type: 'auth'; token: string; ref: Ref | undefined }
  /** Answered `pong` at once: lets a client notice a dead connection without waiting for TCP. */
  | { type: 'ping'; ref: Ref | undefined };

export type ParsedFrame = { ok: true; frame: ClientFrame } | { ok: false; ref: Ref | undefined };

/**
 * Parses one text frame. Anything that is not a JSON object with a known
 * `type` and fields of the right kind is invalid_frame (with the ref echoed
 * when one could be read).
 */
export function parseClientFrame(text: string): ParsedFrame {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { ok: false, ref: undefined };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: false, ref: undefined };
  const f = v as Record<string, unknown>;
  const ref = typeof f.ref === 'string' || (typeof f.ref === 'number' && Number.isFinite(f.ref)) ? f.ref : undefined;
  const bad: ParsedFrame = { ok: false, ref };
  switch (f.type) {
    case 'subscribe': {
      if (f.after !== undefined && f.after !== null && !isMessageId(f.after)) return bad;
      if (f.epoch !== undefined && f.epoch !== null && (typeof f.epoch !== 'string' || !EPOCH_SHAPE.test(f.epoch))) return bad;
      const member = memberDataJson(f.member);
      if (member === 'invalid') return bad;
      return {
        ok: true,
        frame: { type: 'subscribe', topic: f.topic, after: (f.after ?? undefined) as string | undefined, epoch: (f.epoch ?? undefined) as string | undefined, member, ref },
      };
    }
    case 'unsubscribe':
      return { ok: true, frame: { type: 'unsubscribe', topic: f.topic, ref } };
    case 'presence':
      return { ok: true, frame: { type: 'presence', topic: f.topic, ref } };
    case 'publish':
      if (!('data' in f)) return bad;
      return { ok: true, frame: { type: 'publish', topic: f.topic, data: f.data, idempotencyKey: f.idempotency_key ?? undefined, ref } };
    case 'auth':
      if (typeof f.token !== 'string' || f.token.length === 0) return bad;
      return { ok: true, frame: { type: 'auth', token: f.token, ref } };
    case 'ping':
      return { ok: true, frame: { type: 'ping', ref } };
    default:
      return bad;
  }
}

/** A server frame with `ref` echoed when the client sent one. */
export function replyFrame(body: Record<string, unknown>, ref: Ref | undefined): string {
  return JSON.stringify(ref === undefined ? body : { ...body, ref });
}
