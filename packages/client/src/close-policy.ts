import type { RelayErrorCode } from './client-error.js';

/** What the client does after a connection ended (docs/PROTOCOL.md "Close codes"). */
export type CloseDecision =
  | { action: 'reconnect'; /** ask getToken for a fresh token first */ freshToken: boolean; /** skip the backoff's growth (1001: go elsewhere at once) */ immediate: boolean }
  | { action: 'give_up'; code: RelayErrorCode };

/** What the client knows about the connection that ended. */
export interface CloseFacts {
  code: number;
  /** `ready` had arrived on it. */
  wasReady: boolean;
  /** The HTTP status of a refused upgrade, when the WebSocket implementation tells it (`ws` does, browsers do not). */
  refusalStatus: number | undefined;
  /** Auth refusals in a row: 4401 closes and 401 upgrade answers since the last `ready`. */
  authRefusals: number;
  /** Failures before `ready` with no readable status since a 4401, in a row. */
  blindFailuresAfterAuth: number;
  /** 1008 closes in a row. */
  policyCloses: number;
}

export const CLOSE_HOST_DISCONNECTED = 4409;
export const CLOSE_UNAUTHORIZED = 4401;

/**
 * After a 4401 a browser cannot tell a refused upgrade (401) from a network
 * failure: this many failures before `ready` in a row, with a fresh token
 * each, count as "the fresh token is refused too".
 */
export const BLIND_AUTH_ATTEMPTS = 3;

const GIVE_UP_STATUS: Readonly<Record<number, RelayErrorCode>> = {
  400: 'bad_request',
  404: 'not_found',
  426: 'upgrade_required',
  431: 'headers_too_large',
};

/** One pure decision per close, so every code's behaviour is one table-driven test. */
export function decideAfterClose(f: CloseFacts): CloseDecision {
  const reconnect = (freshToken = true, immediate = false): CloseDecision => ({ action: 'reconnect', freshToken, immediate });
  // No WebSocket came of it (a refused or failed upgrade ends in 1006 without a
  // close frame). A socket that opened and was closed before `ready` (4429)
  // carries its own code and is judged by it below.
  if (!f.wasReady && f.code === 1006) {
    const status = f.refusalStatus;
    if (status === 401) return f.authRefusals >= 1 ? { action: 'give_up', code: 'invalid_or_missing_token' } : reconnect();
    if (status !== undefined && GIVE_UP_STATUS[status]) return { action: 'give_up', code: GIVE_UP_STATUS[status] };
    if (status === undefined && f.authRefusals >= 1 && f.blindFailuresAfterAuth + 1 >= BLIND_AUTH_ATTEMPTS) {
      return { action: 'give_up', code: 'invalid_or_missing_token' };
    }
    // 503 auth_unavailable / unavailable, 502, 504, 500, a network failure.
    return reconnect();
  }
  switch (f.code) {
    case CLOSE_UNAUTHORIZED:
      return reconnect();
    case CLOSE_HOST_DISCONNECTED:
    case 1002:
    case 1007:
      return { action: 'give_up', code: 'disconnected' };
    case 1008:
      return f.policyCloses >= 1 ? { action: 'give_up', code: 'disconnected' } : reconnect();
    case 1001:
    case 1012:
      // Going away / service restart (RFC 6455, IANA registry): another instance is there now.
      return reconnect(true, true);
    default:
      // 1006, 1009, 1011, 1013, a server 1000/1005, a ping timeout, codes this version does not know.
      return reconnect();
  }
}
