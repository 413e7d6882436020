import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

/** One raw exchange on its own connection: everything the server sent before closing (or within `ms`). */
export function rawExchange(port: number, bytes: string, ms = 3000): Promise<string> {
  return new Promise((resolve) => {
    const s: Socket = connect(port, '127.0.0.1', () => s.write(bytes));
    let text = '';
    const done = () => resolve(text);
    s.on('data', (d: Buffer) => (text += d.toString()));
    s.on('error', done);
    s.on('close', done);
    setTimeout(() => {
      s.destroy();
      done();
    }, ms).unref();
  });
}

/** Writes `bytes` on a fresh connection and resolves with the status code of the first answer; rejects after `ms`. */
export function rawStatus(port: number, bytes: string | Buffer, ms = 5000): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer to: ${JSON.stringify(bytes.toString('latin1').slice(0, 200))}`));
    }, ms);
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (m) {
        clearTimeout(timer);
        socket.destroy();
        resolve(Number(m[1]));
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export interface HttpAnswer {
  status: number;
  body: string;
}

/** One request with an exact body (node:http, so any method, header and byte string goes). */
export function sendHttp(base: string, method: string, path: string, headers: Record<string, string>, body?: Buffer): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers: body ? { ...headers, 'content-length': String(body.length) } : headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    // A server may answer (413) and close before the whole body is written.
    req.on('error', reject);
    req.end(body);
  });
}
