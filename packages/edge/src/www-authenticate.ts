/** The realm every challenge names. */
const REALM = 'service-relay';

/** `WWW-Authenticate` values: the contract's challenges, written once. */
export const WWW_AUTHENTICATE = Object.freeze({
  /** A tenant token refused (gateway REST, realtime REST and WebSocket upgrade). */
  invalidToken: `Bearer realm="${REALM}", error="invalid_token"`,
  /** The registry's admin API (no error attribute: the admin token is not an OAuth token). */
  adminBearer: `Bearer realm="${REALM}"`,
  /** The host-sync fetch's HTTP Basic credentials. */
  basic: `Basic realm="${REALM}"`,
});

/** The headers of a refused tenant token, ready to pass to sendError. */
export const INVALID_TOKEN_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'www-authenticate': WWW_AUTHENTICATE.invalidToken });
