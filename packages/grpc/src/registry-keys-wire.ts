/** relay.registry.v1 messages as proto-loader hands them over (PROTO_OPTIONS). */
export interface GetTenantKeysRequest {
  tenant_id: string;
}

export interface SigningKeyMessage {
  secret: string;
  key_version: number;
}

export interface GetTenantKeysResponse {
  found: boolean;
  disabled: boolean;
  version: number;
  /** Unset (null when received) when absent. */
  primary?: SigningKeyMessage | null;
  previous?: SigningKeyMessage | null;
  /** The tenant feed sequence the answer reflects. */
  as_of_seq: number;
  /** Users whose tokens issued before `before` are revoked (absent from older peers). */
  user_revocations?: UserRevocationMessage[];
}

export interface UserRevocationMessage {
  user_id: string;
  before: number;
}

export interface ChangesSinceRequest {
  consumer_id: string;
  consumer_kind: string;
  /** -1 before the consumer holds any state. */
  applied_seq: number;
  lease_ms: number;
  limit: number;
}

export interface TenantChangeMessage {
  seq: number;
  tenant_id: string;
  kind: string;
  version: number;
  revoked_key_versions: number[];
  /** JSON object text, or empty. */
  detail_json?: string;
}

export interface ChangesSinceResponse {
  latest_seq: number;
  changes: TenantChangeMessage[];
  reset: boolean;
}

export interface ChannelRulesRequest {
  tenant_id: string;
}

export interface ChannelRulesResponse {
  found: boolean;
  /** The canonical rules document (JSON); empty when not found. */
  rules_json: string;
  version: number;
  /** The tenant feed sequence the answer reflects. */
  as_of_seq: number;
}

export interface TenantLimitsRequest {
  tenant_id: string;
}

export interface TenantLimitsResponse {
  found: boolean;
  /** A partial limits document (JSON); empty when not found. */
  limits_json: string;
  limits_version: number;
  /** The tenant feed sequence the answer reflects. */
  as_of_seq: number;
}

export interface TenantCallbacksRequest {
  tenant_id: string;
}

export interface TenantCallbacksResponse {
  found: boolean;
  /** The callback settings (JSON); empty when the tenant has none. */
  settings_json: string;
  /** Signing secrets, current first. */
  secrets: string[];
  version: number;
  /** The tenant feed sequence the answer reflects. */
  as_of_seq: number;
}

export interface TenantWebhooksRequest {
  tenant_id: string;
}

export interface TenantWebhooksResponse {
  found: boolean;
  /** The event types at least one enabled endpoint wants, each once. */
  events: string[];
  version: number;
  /** The tenant feed sequence the answer reflects. */
  as_of_seq: number;
}
