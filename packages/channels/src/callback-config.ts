import { CAP_PATTERN } from './channel-capability';
import { patternMatches } from './channel-rules';

/**
 * A tenant's callbacks (#32 item 4): before a subscribe (and, separately, a
 * publish) on a channel matching one of its patterns, realtime asks the
 * host's URL and obeys its answer. Shared by the registry (which validates
 * what an operator or host sets) and realtime (which decides with it).
 */
export type CallbackAction = 'subscribe' | 'publish';
export const CALLBACK_ACTIONS: readonly CallbackAction[] = ['subscribe', 'publish'];

export interface CallbackSettings {
  /** Where the signed POST goes: https, or http to a loopback address (or anywhere when the operator allows plain HTTP). */
  readonly url: string;
  /** Channels whose subscribe asks the host first: CAP_PATTERN patterns, or `*` for every channel. */
  readonly subscribe: readonly string[];
  /** Channels whose publish asks the host first. */
  readonly publish: readonly string[];
  /** How long realtime waits for an answer; past it the request is refused with `callback_unavailable`. */
  readonly timeoutMs: number;
}

export const DEFAULT_CALLBACK_TIMEOUT_MS = 1000;
export const CALLBACK_TIMEOUT_BOUNDS = [50, 10_000] as const;
export const MAX_CALLBACK_PATTERNS = 64;
const MAX_URL_LENGTH = 2048;
const PATTERN = (p: string) => p === '*' || CAP_PATTERN.test(p);

/** Whether a request for `action` on `channel` asks the host (no settings: never). */
export function callbackApplies(settings: CallbackSettings | undefined, channel: string, action: CallbackAction): boolean {
  if (!settings) return false;
  for (const p of settings[action]) if (patternMatches(p, channel)) return true;
  return false;
}

/** Host names that are this machine: plain HTTP to them needs no operator setting (a host next to realtime, tests). */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

/** A problem text, or undefined when the URL may be called (https; http only to loopback unless `allowHttp`). */
export function callbackUrlProblem(value: string, allowHttp: boolean): string | undefined {
  if (value.length > MAX_URL_LENGTH) return `url is at most ${MAX_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'url is not an absolute URL';
  }
  if (url.username !== '' || url.password !== '') return 'url must not carry credentials (the request is signed instead)';
  if (url.hash !== '') return 'url must not have a fragment';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && (allowHttp || isLoopbackHost(url.hostname))) return undefined;
  if (url.protocol === 'http:') return 'url must be https (plain http only to a loopback address, unless the operator sets CALLBACK_ALLOW_HTTP=true)';
  return 'url must be https';
}

/**
 * Reads `{url, subscribe?, publish?, timeout_ms?}` (what the admin and host
 * APIs take); a string says what is wrong, for an `invalid_callbacks` answer.
 * At least one pattern in all; patterns are deduplicated and sorted.
 */
export function parseCallbackSettings(value: unknown, allowHttp: boolean): CallbackSettings | string {
  const shape = 'the body is {"url": "https://…", "subscribe"?: [<channel pattern>, …], "publish"?: [<channel pattern>, …], "timeout_ms"?: <50..10000>}';
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return shape;
  const v = value as Record<string, unknown>;
  const unknown = Object.keys(v).find((k) => !['url', 'subscribe', 'publish', 'timeout_ms'].includes(k));
  if (unknown !== undefined) return `unknown field "${unknown.slice(0, 64)}"; ${shape}`;
  if (typeof v.url !== 'string') return `url is required; ${shape}`;
  const urlProblem = callbackUrlProblem(v.url, allowHttp);
  if (urlProblem) return urlProblem;
  const patterns: Record<CallbackAction, string[]> = { subscribe: [], publish: [] };
  for (const action of CALLBACK_ACTIONS) {
    const list = v[action];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.length > MAX_CALLBACK_PATTERNS) return `${action} is an array of at most ${MAX_CALLBACK_PATTERNS} channel patterns`;
    for (const p of list) {
      if (typeof p !== 'string' || !PATTERN(p)) return `${action}: "${String(p).slice(0, 140)}" is not a channel pattern (a channel name, optionally ending in *, or * alone)`;
    }
    patterns[action] = [...new Set(list as string[])].sort();
  }
  if (patterns.subscribe.length + patterns.publish.length === 0) return 'name at least one channel pattern in subscribe or publish';
  const timeout = v.timeout_ms ?? DEFAULT_CALLBACK_TIMEOUT_MS;
  const [min, max] = CALLBACK_TIMEOUT_BOUNDS;
  if (typeof timeout !== 'number' || !Number.isSafeInteger(timeout) || timeout < min || timeout > max) return `timeout_ms is a whole number from ${min} to ${max}`;
  return Object.freeze({ url: v.url, subscribe: Object.freeze(patterns.subscribe), publish: Object.freeze(patterns.publish), timeoutMs: timeout });
}

/** The stored and shown form. */
export function callbackSettingsJson(s: CallbackSettings): { url: string; subscribe: string[]; publish: string[]; timeout_ms: number } {
  return { url: s.url, subscribe: [...s.subscribe], publish: [...s.publish], timeout_ms: s.timeoutMs };
}
