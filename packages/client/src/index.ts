export { createRelayClient, RelayClient } from './relay-client.js';
export { RelayChannel } from './channel.js';
export type {
  ChannelEvents,
  ChannelPresenceEvent,
  ChannelState,
  ConnectionState,
  Disconnected,
  Gap,
  HistoryOptions,
  HistoryPage,
  PresenceEvent,
  PublishOptions,
  RelayClientEvents,
  RelayClientOptions,
  RelayMessage,
  SubscribeOptions,
  Subscribed,
} from './types.js';
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
