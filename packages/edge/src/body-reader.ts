import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendError } from '@service-relay/core';

/** The client went away before its body ended: nobody is left to answer. */
export class ClientAbortedError extends Error {
  constructor() {
    super('client closed the request before its body ended');
    this.name = 'ClientAbortedError';
  }
}

export interface BodyReadOptions {
  /**
   * Past the limit, go on reading and discarding the rest so the connection
   * can serve the next request. Default: stop reading (pause); the answer
   * then closes the connection.
   */
  drain?: boolean;
  /** Extra headers on the 413 (readBodyOrRefuse), e.g. the limit's number. */
  refusalHeaders?: Readonly<Record<string, string>>;
}

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
export function readBodyLimited(req: IncomingMessage, limit: number, opts: BodyReadOptions = {}): Promise<Buffer | undefined> {
  if (declaredTooLarge(req, limit)) {
    if (opts.drain) req.resume();
    return Promise.resolve(undefined);
  }
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
        if (opts.drain) req.resume();
        else req.pause();
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
 * payload_too_large` past the limit (closing the connection unless the rest
 * was drained), or the connection destroyed when the client went away.
 */
export async function readBodyOrRefuse(req: IncomingMessage, res: ServerResponse, limit: number, opts: BodyReadOptions = {}): Promise<Buffer | undefined> {
  let body: Buffer | undefined;
  try {
    body = await readBodyLimited(req, limit, opts);
  } catch {
    res.destroy();
    return undefined;
  }
  if (body === undefined) sendError(res, 'payload_too_large', { ...opts.refusalHeaders }, { closeIfUnread: !opts.drain });
  return body;
}
