export {
  createRelayClient,
  RelayClient,
  type ConnectionState,
  type Disconnected,
  type Gap,
  type PresenceEvent,
  type RelayClientEvents,
  type RelayClientOptions,
  type RelayMessage,
  type SubscribeOptions,
  type Subscribed,
} from './relay-client.js';
export {
  CLIENT_ERROR_CODES,
  isRelayClientError,
  RelayClientError,
  SERVER_ERROR_CODES,
  type ClientErrorCode,
  type ErrorDetails,
  type RelayErrorCode,
  type ServerErrorCode,
} from './client-error.js';
export { decideAfterClose, type CloseDecision, type CloseFacts } from './close-policy.js';
export type { BackoffOptions } from './backoff.js';
export type { JsonValue, PresenceMember, RecoveryReason } from './frames.js';
export type { WebSocketConstructor, WebSocketLike } from './socket.js';
