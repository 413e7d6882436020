import { RelayError } from '@service-relay/core';

// Socket-level failures and the SQLSTATE classes that mean "the server is not
// there or not taking work": 08 connection exception, 53 insufficient
// resources, 57P01-57P03 shutdown / cannot connect now.
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGES = /connection terminated|timeout exceeded when trying to connect|connection (?:is )?closed|client has encountered a connection error|cannot use a pool after calling end/i;

/**
 * A database that cannot be reached is `unavailable` (503) to every caller,
 * never `internal`; anything else (a bug, a constraint) stays what it is.
 */
export function classifyDbError(err: unknown): unknown {
  if (err instanceof RelayError) return err;
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (SOCKET_CODES.has(code) || code.startsWith('08') || code.startsWith('53') || /^57P0[123]$/.test(code) || UNAVAILABLE_MESSAGES.test(message)) {
    return new RelayError('unavailable', 'database unavailable', { cause: err });
  }
  return err;
}
