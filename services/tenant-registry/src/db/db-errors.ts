import { RelayError } from '@service-relay/core';

// Socket-level failures and the SQLSTATE classes that mean "the server is not
// there or not taking work": 08 connection exception, 53 insufficient
// resources, 57P01-57P03 shutdown / cannot connect now, 57014 a statement
// cancelled (statement_timeout: the server took longer than the budget),
// 55P03 a lock not available in time.
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGES =
  /connection terminated|timeout exceeded when trying to connect|connection (?:is )?closed|client has encountered a connection error|cannot use a pool after calling end|query read timeout|client was closed and is not queryable/i;
// The server did not answer in time (as opposed to a pool busy with other
// work, which is "timeout exceeded when trying to connect", or a server that
// refuses at once): a statement or a new connection timed out.
const SILENCE_MESSAGES = /query read timeout|connection terminated due to connection timeout/i;

function parts(err: unknown): { code: string; message: string } {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  return { code: typeof e?.code === 'string' ? e.code : '', message: typeof e?.message === 'string' ? e.message : '' };
}

/**
 * A database that cannot be reached, or does not answer within the budget,
 * is `unavailable` (503) to every caller, never `internal`; anything else
 * (a bug, a constraint) stays what it is.
 */
export function classifyDbError(err: unknown): unknown {
  if (err instanceof RelayError) return err;
  const { code, message } = parts(err);
  if (
    SOCKET_CODES.has(code) ||
    code.startsWith('08') ||
    code.startsWith('53') ||
    /^57P0[123]$/.test(code) ||
    code === '57014' ||
    code === '55P03' ||
    UNAVAILABLE_MESSAGES.test(message)
  ) {
    return new RelayError('unavailable', 'database unavailable', { cause: err });
  }
  return err;
}

/**
 * The server let a statement or a connection time out: it is hung (its
 * processes stopped) or unreachable without a refusal. Not a busy pool, not a
 * refusal (a server that is down answers at once, and is asked each time),
 * not a statement error.
 */
export function isServerSilence(err: unknown): boolean {
  if (err instanceof RelayError) return false;
  const { code, message } = parts(err);
  return code === 'ETIMEDOUT' || SILENCE_MESSAGES.test(message);
}

/** An error the server reported on a working connection (it carries a SQLSTATE): the connection can go on (ROLLBACK). */
export function isStatementError(err: unknown): boolean {
  const { code } = parts(err);
  return /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !/^57P0[123]$/.test(code);
}
