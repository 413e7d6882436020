import { isUuid, type ErrorCode } from '@service-relay/core';
import { CHANNEL_NAME, decodeChannel } from '@service-relay/channels';

/** One server publish reaches at most this many channels. */
export const MAX_PUBLISH_CHANNELS = 100;
/** `issued_before` may lie this far ahead of the registry's clock (host clocks drift a little). */
export const ISSUED_BEFORE_SKEW_S = 60;
/** The idempotency key grammar realtime applies (docs/ARCHITECTURE.md "Idempotent publish"). */
const IDEMPOTENCY_KEY = /^[A-Za-z0-9_.:-]{1,128}$/;

/** A refused request: the contract's code and a sentence naming what is allowed. */
export interface HostProblem {
  code: ErrorCode;
  problem: string;
}

export interface PublishRequest {
  channels: string[];
  data: unknown;
  idempotencyKey?: string;
}

export function isProblem(v: unknown): v is HostProblem {
  return typeof v === 'object' && v !== null && 'problem' in v;
}

const problem = (code: ErrorCode, text: string): HostProblem => ({ code, problem: text });

/**
 * `{"channels":[…],"data":…,"idempotency_key"?}`: 1..100 distinct valid
 * channel names, `data` present (its size and depth are realtime's rule, as
 * for every publish). Nothing else is accepted, so a typo is not silently ignored.
 */
export function parsePublishRequest(body: unknown): PublishRequest | HostProblem {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return problem('invalid_body', 'the body must be a JSON object {"channels":[…],"data":…}');
  const b = body as Record<string, unknown>;
  for (const name of Object.keys(b)) {
    if (name !== 'channels' && name !== 'data' && name !== 'idempotency_key') return problem('invalid_body', `unknown member "${name.slice(0, 64)}"; allowed: channels, data, idempotency_key`);
  }
  if (!Object.hasOwn(b, 'data')) return problem('invalid_body', 'data is required (any JSON value)');
  const channels = b.channels;
  if (!Array.isArray(channels) || channels.length < 1 || channels.length > MAX_PUBLISH_CHANNELS) return problem('invalid_body', `channels must be an array of 1 to ${MAX_PUBLISH_CHANNELS} channel names`);
  const seen = new Set<string>();
  for (const c of channels) {
    if (typeof c !== 'string' || !CHANNEL_NAME.test(c)) return problem('invalid_channel', 'every channel must be 1 to 128 characters of A-Z a-z 0-9 _ . : -');
    if (seen.has(c)) return problem('invalid_body', `channels must be distinct ("${c}" is named twice)`);
    seen.add(c);
  }
  const key = b.idempotency_key;
  if (key !== undefined && (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key))) return problem('invalid_body', 'idempotency_key must be 1 to 128 characters of A-Z a-z 0-9 _ . : -');
  return { channels: [...seen], data: b.data, ...(key !== undefined && { idempotencyKey: key }) };
}

/**
 * `{"issued_before"?: unix seconds}` (an absent or empty body means now):
 * an integer from 0 to now + ISSUED_BEFORE_SKEW_S.
 */
export function parseRevokeRequest(body: unknown, nowS: number): { before: number } | HostProblem {
  const latest = nowS + ISSUED_BEFORE_SKEW_S;
  const range = `issued_before must be an integer number of unix seconds from 0 to ${latest} (now + ${ISSUED_BEFORE_SKEW_S} s)`;
  if (body === undefined) return { before: nowS };
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return problem('invalid_body', 'the body must be a JSON object {"issued_before"?: unix seconds}');
  const b = body as Record<string, unknown>;
  for (const name of Object.keys(b)) if (name !== 'issued_before') return problem('invalid_body', `unknown member "${name.slice(0, 64)}"; allowed: issued_before`);
  const before = b.issued_before;
  if (before === undefined || before === null) return { before: nowS };
  if (typeof before !== 'number' || !Number.isSafeInteger(before) || before < 0 || before > latest) return problem('invalid_body', range);
  return { before };
}

/** A user id in a path: a UUID in either case, as the contract's tokens carry it. */
export function parseUserId(segment: string): string | HostProblem {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    decoded = '';
  }
  return isUuid(decoded) ? decoded.toLowerCase() : problem('invalid_body', 'the user id in the path must be a UUID');
}

/** A channel in a path, percent-decoded. */
export function parseChannel(segment: string): string | HostProblem {
  return decodeChannel(segment) ?? problem('invalid_channel', 'the channel must be 1 to 128 characters of A-Z a-z 0-9 _ . : -');
}
