/** WebSocket close codes realtime sends. */
export const CLOSE_GOING_AWAY = 1001;
/** A slow consumer, or a connection whose token could not be re-checked: reconnect later. */
export const CLOSE_TRY_AGAIN_LATER = 1013;
/** The token expired or was revoked (CONTRACT.md). */
export const CLOSE_UNAUTHORIZED = 4401;
/** The tenant's host server disconnected this user (#13): the client must not reconnect on its own. */
export const CLOSE_DISCONNECTED_BY_HOST = 4409;
/** The tenant already holds MAX_CONNECTIONS_PER_TENANT connections (an `error` frame with `limit` precedes it). */
export const CLOSE_TOO_MANY_CONNECTIONS = 4429;
