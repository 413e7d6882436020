import { MAX_DATA_BYTES } from '@service-relay/core';

/**
 * Largest tenant REST body the gateway forwards: 64 KiB of `data` plus 4 KiB
 * for the `{"data": ...}` envelope and modest whitespace. This is a coarse,
 * early guard on raw bytes; realtime applies the exact 64 KiB rule to the
 * serialized `data` and answers 413 itself for anything in between.
 */
export const MAX_API_BODY_BYTES = MAX_DATA_BYTES + 4096;

/** The host-sync fetch takes no body; a little is tolerated and forwarded. */
export const MAX_HOST_FETCH_BODY_BYTES = 4096;

/**
 * The host server API (#13): a publish carries 64 KiB of `data` and up to 100
 * channel names of 128 characters; 20 KiB covers the names, the envelope and
 * modest whitespace. The registry and realtime apply the exact rules.
 */
export const MAX_HOST_API_BODY_BYTES = MAX_DATA_BYTES + 20 * 1024;
