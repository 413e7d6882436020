/** relay.auth.v1 messages as proto-loader hands them over (PROTO_OPTIONS). */
export interface VerifyRequest {
  token: string;
}

export interface VerifyResponseWire {
  valid: boolean;
  tenant_id: string;
  user_id: string;
  expires_at: number;
  key_slot: 'KEY_SLOT_UNSPECIFIED' | 'KEY_SLOT_PRIMARY' | 'KEY_SLOT_PREVIOUS';
  key_version: number;
  reason: string;
  /** The `cap` claim, compact canonical JSON; '' (or absent from older peers) when the token has none. */
  cap_json?: string;
  /** The token's integer `iat`; 0 (or absent from older peers) when it has none. */
  issued_at?: number;
  /** The tenant-feed sequence the verdict reflects (a zookie); 0 (or absent) from older verifiers. */
  as_of_seq?: number;
}

export interface VerifyStreamRequest {
  id: number;
  token: string;
  /** W3C traceparent of the caller's span; absent (or '') when not tracing. */
  traceparent?: string;
  /** Judge on tenant state at or after this feed sequence; 0 or absent: any state the verifier trusts. */
  min_seq?: number;
}

export interface VerifyStreamResponse {
  id: number;
  /** Null when `unavailable`. */
  result: VerifyResponseWire | null;
  /** The verifier could not decide; the caller fails closed. */
  unavailable: boolean;
}

/** The most checks one VerifyBatchRequest may carry; a larger one ends the stream with INVALID_ARGUMENT. */
export const MAX_VERIFY_BATCH = 256;

export interface VerifyBatchRequest {
  checks: VerifyStreamRequest[];
}

export interface VerifyBatchResponse {
  results: VerifyStreamResponse[];
}

export interface ExplainRequest {
  token: string;
}

/** relay.auth.v1.ExplainResponse: for operators only (the registry's admin API). */
export interface ExplainResponseWire {
  verdict: VerifyResponseWire | null;
  meaning: string;
  fix: string;
  /** Compact JSON of the header / payload; '' when a segment does not decode to a JSON object. */
  header_json: string;
  claims_json: string;
}
