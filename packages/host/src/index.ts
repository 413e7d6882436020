export { createHostClient, DEFAULT_REFRESH_INTERVAL_MS, type HostClient, type HostClientOptions, type PublishOptions, type RefreshResult } from './host-client.js';
export type { ChannelPresence, PresenceMember, ServerMessage } from './server-api.js';
export { HOST_CLIENT_ERROR_CODES, HostClientError, isHostClientError, type HostClientErrorCode } from './host-client-error.js';
export { fetchSigningSecret, parseRetryAfter, RELAY_ISSUER, type FetchedSecret } from './secret-fetch.js';
export { CHANNEL_ACTIONS, DEFAULT_MAX_TOKEN_LIFETIME_S, DEFAULT_TOKEN_TTL_S, type ChannelAction, type TokenRule } from './token-rules.js';
export type { ChannelCap, JsonValue, UserTokenOptions } from './user-token.js';
export { callbackAnswer, DEFAULT_TOLERANCE_S, RelaySignatureError, verifyCallback, verifyRelaySignature, type CallbackRequest, type RelayHeaders, type SignatureFailure, type VerifyOptions } from './webhook-verify.js';
export { verifyWebhook, type WebhookEvent } from './webhook-verify.js';
