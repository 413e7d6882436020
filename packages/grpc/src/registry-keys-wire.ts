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
}
