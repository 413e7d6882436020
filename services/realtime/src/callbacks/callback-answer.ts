/** A host's answer to a callback: `{"allow": boolean, "ttl_s"?: 0..86400, "presence"?: {...}}`. */
export interface CallbackAnswer {
  allow: boolean;
  /** Seconds the answer may be reused for this user, channel and action; 0: ask every time. */
  ttlS: number;
  /** Presence member data for a subscribe (a JSON object; the client's `member` is replaced). */
  presence?: unknown;
}

const MAX_TTL_S = 86_400;

/** The answer, or what is wrong with it (which refuses the request with callback_unavailable). */
export function readCallbackAnswer(text: string): CallbackAnswer | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return 'answer is not JSON';
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'answer is not a JSON object';
  const a = v as Record<string, unknown>;
  if (typeof a.allow !== 'boolean') return 'answer has no boolean "allow"';
  const ttl = a.ttl_s ?? 0;
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl < 0 || ttl > MAX_TTL_S) return `ttl_s is a whole number from 0 to ${MAX_TTL_S}`;
  return { allow: a.allow, ttlS: ttl, ...(a.presence !== undefined && a.presence !== null && { presence: a.presence }) };
}
