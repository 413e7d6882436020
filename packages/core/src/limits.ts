/** CONTRACT.md: a token is at most 8 KiB; longer ones are refused without any work. */
export const MAX_TOKEN_BYTES = 8192;

/** CONTRACT.md: a message's `data`, serialized, is at most 64 KiB. */
export const MAX_DATA_BYTES = 65_536;

/**
 * HTTP answers refused by a limit name its number in this header (the body
 * stays the contract's `{"errors":[code]}`): docs/API.md "Limits".
 */
export const LIMIT_HEADER = 'x-relay-limit';

/** A 413 `payload_too_large` on the tenant API: the rule a client can act on is the 64 KiB of `data`. */
export const DATA_LIMIT_HEADERS: Readonly<Record<string, string>> = Object.freeze({ [LIMIT_HEADER]: String(MAX_DATA_BYTES) });
