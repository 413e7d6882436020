export { createHostClient, DEFAULT_REFRESH_INTERVAL_MS, type HostClient, type HostClientOptions, type PublishOptions, type RefreshResult } from './host-client';
export type { ChannelPresence, PresenceMember, ServerMessage } from './server-api';
export { HOST_CLIENT_ERROR_CODES, HostClientError, isHostClientError, type HostClientErrorCode } from './host-client-error';
export { fetchSigningSecret, parseRetryAfter, RELAY_ISSUER, type FetchedSecret } from './secret-fetch';
export type { ChannelAction, ChannelCap, JsonValue, UserTokenOptions } from './user-token';
