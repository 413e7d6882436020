import { request } from 'node:http';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Bytes the client managed to write before the answer came. */
  sent: number;
}

/**
 * POSTs `totalBytes` of body in 64 KiB chunks (chunked unless `contentLength`
 * is given, in which case only the headers are sent), honouring backpressure,
 * and resolves with the answer: the gateway may answer and close early.
 */
export function streamUpload(url: string, totalBytes: number, opts: { headers?: Record<string, string>; contentLength?: boolean } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
    if (opts.contentLength) headers['content-length'] = String(totalBytes);
    const req = request(url, { method: 'POST', headers });
    let sent = 0;
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString('utf8'), sent }));
      res.on('error', reject);
    });
    // Writes fail once the gateway closes the connection after its answer.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (opts.contentLength) {
      req.flushHeaders();
      return;
    }
    const pump = () => {
      while (sent < totalBytes && !answered && !req.destroyed) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (sent >= totalBytes) req.end();
    };
    pump();
  });
}
