import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendError } from './error-response';

/** The client went away before its body ended: nobody is left to answer. */
export class ClientAbortedError extends Error {
  constructor() {
    super('client closed the request before its body ended');
    this.name = 'ClientAbortedError';
  }
}

export interface BodyReadOptions {
  /** Extra headers on the 413 (readBodyOrRefuse), e.g. the limit's number. */
  refusalHeaders?: Readonly<Record<string, string>>;
  /** How much of the rest is read and discarded after a 413 (default LINGER). */
  linger?: LingerBound;
}

/** After an early answer, how much more of the request body is read and discarded, and for how long. */
export interface LingerBound {
  /** Bytes of body still to come (declared or counted) past which the connection is closed instead. */
  maxBytes: number;
  /** Milliseconds past which the connection is closed even if the body goes on. */
  maxMs: number;
}

/**
 * A lingering close, bounded (Apache's and nginx's `lingering_close`): a
 * client still uploading when the 413 arrives finishes writing into a
 * connection that reads and drops its bytes, then reads the answer. Closing
 * at once makes the kernel reset the connection while the client writes, and
 * most clients (Node's fetch: 22 of 40 POSTs of 5 MiB) report EPIPE or
 * ECONNRESET instead of the 413. 16 MiB and 10 s cover any body a browser or
 * SDK sends by mistake, and cap what one bad request costs.
 */
export const LINGER: LingerBound = Object.freeze({ maxBytes: 16 * 1024 * 1024, maxMs: 10_000 });

/** True when the declared Content-Length alone is over the limit: refuse before reading anything. */
export function declaredTooLarge(req: IncomingMessage, limit: number): boolean {
  const declared = req.headers['content-length'];
  return declared !== undefined && Number(declared) > limit;
}

/**
 * Reads the body into memory, at most `limit` bytes. Resolves undefined as
 * soon as the count passes the limit (chunked bodies included) and stops
 * keeping bytes, so a huge upload costs no more memory than the limit.
 * Rejects with ClientAbortedError when the client goes away mid-body.
 */
export function readBodyLimited(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  if (declaredTooLarge(req, limit)) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        chunks.length = 0;
        // Nothing more is read until the caller answers (refuseTooLarge reads the rest, bounded).
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = () => {
      cleanup();
      reject(new ClientAbortedError());
    };
    const onClose = () => {
      if (req.complete) return;
      cleanup();
      reject(new ClientAbortedError());
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * The body, or undefined once the request has been answered: `413
 * payload_too_large` past the limit (refuseTooLarge), or the connection
 * destroyed when the client went away.
 */
export async function readBodyOrRefuse(req: IncomingMessage, res: ServerResponse, limit: number, opts: BodyReadOptions = {}): Promise<Buffer | undefined> {
  let body: Buffer | undefined;
  try {
    body = await readBodyLimited(req, limit);
  } catch {
    res.destroy();
    return undefined;
  }
  if (body === undefined) refuseTooLarge(req, res, opts.refusalHeaders, opts.linger);
  return body;
}

/**
 * `413 payload_too_large`, then a lingering close: the rest of the body is
 * read and discarded so the client reads the answer; a body that ends within
 * the bound leaves the connection usable for the next request, one that does
 * not (or declares more than the bound) is cut.
 */
export function refuseTooLarge(req: IncomingMessage, res: ServerResponse, headers: Readonly<Record<string, string>> = {}, bound: LingerBound = LINGER): void {
  const declared = Number(req.headers['content-length']);
  if (req.complete || req.destroyed || (Number.isFinite(declared) && declared > bound.maxBytes)) {
    sendError(res, 'payload_too_large', { ...headers }, { closeIfUnread: true });
    return;
  }
  sendError(res, 'payload_too_large', { ...headers });
  discardRest(req, bound);
}

/** Reads and drops what is left of the body; past the bound, the connection is destroyed. */
function discardRest(req: IncomingMessage, bound: LingerBound): void {
  let seen = 0;
  const cut = () => {
    cleanup();
    req.socket.destroy();
  };
  const timer = setTimeout(cut, bound.maxMs);
  timer.unref();
  const onData = (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > bound.maxBytes) cut();
  };
  const cleanup = () => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', cleanup);
    req.off('close', cleanup);
  };
  req.on('data', onData);
  req.once('end', cleanup);
  req.once('close', cleanup);
  req.resume();
}
