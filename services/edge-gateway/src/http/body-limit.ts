import type { IncomingMessage } from 'node:http';

/**
 * Largest tenant REST body the gateway forwards: 64 KiB of `data` plus 4 KiB
 * for the `{"data": ...}` envelope and modest whitespace. This is a coarse,
 * early guard on raw bytes; realtime applies the exact 64 KiB rule to the
 * serialized `data` and answers 413 itself for anything in between.
 */
export const MAX_API_BODY_BYTES = 65_536 + 4096;

/** The host-sync fetch takes no body; a little is tolerated and forwarded. */
export const MAX_HOST_FETCH_BODY_BYTES = 4096;

/** True when the declared Content-Length alone is over the limit: refuse before reading anything. */
export function declaredTooLarge(req: IncomingMessage, limit: number): boolean {
  const declared = req.headers['content-length'];
  return declared !== undefined && Number(declared) > limit;
}

/**
 * Reads the body into memory, at most `limit` bytes. Resolves undefined as
 * soon as the count passes the limit (chunked bodies included) and stops
 * reading, so a huge upload costs no more memory than the limit.
 * Rejects when the client goes away mid-body.
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
        req.pause();
        chunks.length = 0;
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onClose = () => {
      if (req.complete) return;
      cleanup();
      reject(new Error('client closed the request before its body ended'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
