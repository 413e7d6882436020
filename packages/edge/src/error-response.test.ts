import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { rawErrorResponse, sendError } from './error-response';

describe('error responses', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((done) => (server ? server.close(() => done()) : done())));

  it('sendError takes the status from the code table', async () => {
    server = createServer((_req, res) => sendError(res, 'upgrade_required', { upgrade: 'websocket' }));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    expect(res.status).toBe(426);
    expect(res.headers.get('upgrade')).toBe('websocket');
    expect(await res.json()).toEqual({ errors: ['upgrade_required'] });
  });

  it('every 503 says when to retry: one second unless the caller set Retry-After', async () => {
    let extra: Record<string, string> = {};
    server = createServer((_req, res) => sendError(res, 'auth_unavailable', extra));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const first = await fetch(url);
    expect([first.status, first.headers.get('retry-after')]).toEqual([503, '1']);
    expect(await first.json()).toEqual({ errors: ['auth_unavailable'] });
    extra = { 'Retry-After': '7' };
    expect((await fetch(url)).headers.get('retry-after')).toBe('7');
    expect(rawErrorResponse('unavailable')).toContain('Retry-After: 1\r\n');
    expect(rawErrorResponse('unavailable', 'retry-after: 3\r\n')).not.toContain('Retry-After: 1');
    expect(rawErrorResponse('not_found')).not.toMatch(/retry-after/i);
  });

  it('closeIfUnread closes the connection only when a declared body was not read: a refusal of a bodyless request keeps it alive', async () => {
    server = createServer((_req, res) => sendError(res, 'rate_limited', {}, { closeIfUnread: true }));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const get = await fetch(url);
    expect([get.status, get.headers.get('connection')]).toEqual([429, 'keep-alive']);
    // An empty string body: fetch sends Content-Length: 0 itself. A hand-set content-length was refused in one full run, where the global fetch dispatched through the npm undici package's Agent (stack: node_modules/undici), not Node's own.
    const empty = await fetch(url, { method: 'POST', body: '' });
    expect(empty.headers.get('connection')).toBe('keep-alive');
    const unread = await fetch(url, { method: 'POST', body: 'x'.repeat(100_000) });
    expect(unread.headers.get('connection')).toBe('close');
  });

  it('rawErrorResponse is a complete HTTP/1.1 answer that closes the connection', () => {
    const raw = rawErrorResponse('not_found', 'X-Test: 1\r\n');
    const [head, body] = raw.split('\r\n\r\n');
    expect(head!.split('\r\n')[0]).toBe('HTTP/1.1 404 Not Found');
    expect(head).toContain('X-Test: 1');
    expect(head).toContain('Connection: close');
    expect(head).toContain(`Content-Length: ${Buffer.byteLength(body!)}`);
    expect(JSON.parse(body!)).toEqual({ errors: ['not_found'] });
  });
});
