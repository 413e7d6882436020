/** CONTRACT.md: a token is at most 8 KiB; longer ones are refused without any work. */
export const MAX_TOKEN_BYTES = 8192;

/** CONTRACT.md: a message's `data`, serialized, is at most 64 KiB. */
export const MAX_DATA_BYTES = 65_536;
