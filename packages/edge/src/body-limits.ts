import { MAX_DATA_BYTES, MAX_TOKEN_BYTES } from '@service-relay/core';

// Every HTTP body bound, in one place. Each is a coarse guard on raw bytes,
// checked before anything is parsed (readBodyOrRefuse answers 413 past it);
// the exact rules (the 64 KiB of `data`, a token's 8 KiB) are applied to what
// is parsed, by the service that owns them.

/**
 * HTTP answers refused by a limit name its number in this header (the body
 * stays the contract's `{"errors":[code]}`): docs/API.md "Limits".
 */
export const LIMIT_HEADER = 'x-relay-limit';

/** A 413 `payload_too_large` on the tenant API: the rule a client can act on is the 64 KiB of `data`. */
export const DATA_LIMIT_HEADERS: Readonly<Record<string, string>> = Object.freeze({ [LIMIT_HEADER]: String(MAX_DATA_BYTES) });

/**
 * The gateway's bound on a tenant REST body: 64 KiB of `data` plus 4 KiB for
 * the `{"data": ...}` envelope and modest whitespace. An early guard; realtime
 * applies the exact 64 KiB rule to the serialized `data` and answers 413 itself
 * for anything in between.
 */
export const MAX_API_BODY_BYTES = MAX_DATA_BYTES + 4096;

/** The host-sync fetch takes no body; a little is tolerated and forwarded. */
export const MAX_HOST_FETCH_BODY_BYTES = 4096;

/**
 * The gateway's bound on a host server API body (#13): a publish carries 64 KiB
 * of `data` and up to 100 channel names of 128 characters; 20 KiB covers the
 * names, the envelope and modest whitespace. The registry and realtime apply
 * the exact rules.
 */
export const MAX_HOST_API_BODY_BYTES = MAX_DATA_BYTES + 20 * 1024;

/**
 * Behind the gateway, a publish body (realtime's REST and server API, the
 * registry's host publish): bigger than its data (envelope, up to 100 channel
 * names, whitespace), but not without bound.
 */
export const MAX_PUBLISH_BODY_BYTES = 4 * MAX_DATA_BYTES;

/** The host API's revoke_tokens and disconnect take at most `{"issued_before":…}`. */
export const MAX_HOST_ACTION_BODY_BYTES = 1024;

/** Admin calls take no body; a small limit keeps junk cheap to refuse. */
export const MAX_ADMIN_BODY_BYTES = 1024;

/** A tenant's name and labels (admin create and update): 64 labels of 63-character keys and values, and the name, fit well within. */
export const MAX_META_BODY_BYTES = 16 * 1024;

/** The largest admin body: a channel rules document (MAX_CHANNEL_RULES rules of the longest pattern and every action fit well within). */
export const MAX_RULES_BODY_BYTES = 128 * 1024;

/** explain_token's body: `{"token": ...}` with a token up to twice the verifier's limit (a too_large one is explained too). */
export const MAX_EXPLAIN_BODY_BYTES = 2 * MAX_TOKEN_BYTES + 1024;
