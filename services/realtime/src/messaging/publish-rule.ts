import { MAX_DATA_BYTES } from '@service-relay/core';
import type { ChannelRef, Message } from './message';
import type { MessageBus } from './message-bus';

/**
 * Arrays and objects may nest this deep in `data`. Serializing is recursive:
 * without a bound, a body of a few kilobytes nested thousands deep
 * overflowed the stack.
 */
export const MAX_DATA_DEPTH = 64;
export const IDEMPOTENCY_KEY = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Why a publish was refused before reaching the store; each transport names `malformed` its own way. */
export type PublishRefusal = 'malformed' | 'payload_too_large' | 'unavailable';
/** `bytes`: the UTF-8 size of the message's `data` (usage metering counts it). */
export type PublishVerdict = { ok: true; message: Message; bytes: number } | { ok: false; refusal: PublishRefusal };

export interface PublishRuleDeps {
  messages: MessageBus;
  /** False while this instance must not take publishes (its tenant feed is not current). */
  acceptingPublishes: () => boolean;
}

export interface PublishRequest {
  ref: ChannelRef;
  userId: string;
  data: unknown;
  /** As the client sent it; undefined when absent. */
  idempotencyKey: unknown;
  /** The tenant's largest message (#30, at most MAX_DATA_BYTES); default MAX_DATA_BYTES. */
  maxDataBytes?: number;
  /** The tenant's history limits (#30); default: the store's. */
  retention?: { maxMessages: number; ttlS: number };
}

/**
 * The one publish rule, for REST and WebSocket alike: checks the key and
 * the data, then the gate, then stores. A store failure is thrown
 * (`unavailable`), as for any other read or write.
 */
export async function applyPublishRule(deps: PublishRuleDeps, req: PublishRequest): Promise<PublishVerdict> {
  const key = req.idempotencyKey;
  if (key !== undefined && (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key))) return refuse('malformed');
  if (!nestsWithin(req.data, MAX_DATA_DEPTH)) return refuse('malformed');
  const dataJson = JSON.stringify(req.data);
  if (dataJson === undefined) return refuse('malformed');
  const bytes = Buffer.byteLength(dataJson);
  if (bytes > Math.min(req.maxDataBytes ?? MAX_DATA_BYTES, MAX_DATA_BYTES)) return refuse('payload_too_large');
  if (!deps.acceptingPublishes()) return refuse('unavailable');
  const message = await deps.messages.publish(req.ref, req.userId, dataJson, { ...(key !== undefined && { idempotencyKey: key }), ...(req.retention && { retention: req.retention }) });
  return { ok: true, message, bytes };
}

/** True when no array or object lies deeper than `levels` (a scalar is depth 0). Recursion stops at the bound. */
export function nestsWithin(value: unknown, levels: number): boolean {
  if (typeof value !== 'object' || value === null) return true;
  if (levels === 0) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (!nestsWithin(item, levels - 1)) return false;
    return true;
  }
  for (const k in value) if (!nestsWithin((value as Record<string, unknown>)[k], levels - 1)) return false;
  return true;
}

function refuse(refusal: PublishRefusal): PublishVerdict {
  return { ok: false, refusal };
}
