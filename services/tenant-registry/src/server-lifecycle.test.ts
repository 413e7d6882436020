import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { httpGraceMs } from './server';
import { startTestRegistry, type TestRegistry } from './testing/test-registry';

/** Everything the server sent until it closed the connection, and when it closed. */
function collect(socket: Socket): Promise<{ text: string; closedAt: number }> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
    socket.on('error', () => {});
    socket.on('close', () => resolve({ text, closedAt: performance.now() }));
  });
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

describe("the registry's HTTP listener", () => {
  let reg: TestRegistry | undefined;
  afterEach(async () => {
    await reg?.stop().catch(() => {});
    reg = undefined;
  });

  it('cuts a connection that never sends a byte (the connection guard of the gateway and realtime)', async () => {
    reg = await startTestRegistry({ env: { FIRST_BYTE_TIMEOUT_MS: '300' }, logLevel: 'silent' });
    const socket = await open(reg.server.httpPort);
    const openedAt = performance.now();
    const { text, closedAt } = await collect(socket);
    expect(text).toBe('');
    expect(closedAt - openedAt).toBeGreaterThanOrEqual(250);
    expect(closedAt - openedAt).toBeLessThan(2000);
    // A client that talks is served as before.
    expect((await reg.admin('GET', '/admin/tenants')).status).toBe(200);
  }, 60_000);

  it('on stop, answers a request in flight whose body arrives 400 ms after the signal, and refuses new connections', async () => {
    reg = await startTestRegistry({ logLevel: 'silent' });
    // A consumer with a lease longer than the old 2 s grace: the create is answered only once it confirms, over gRPC.
    const consumer = await reg.consumer(5000);
    const port = reg.server.httpPort;
    const socket = await open(port);
    const answer = collect(socket);
    socket.write(`POST /admin/tenants HTTP/1.1\r\nhost: registry\r\nauthorization: Bearer ${reg.adminToken}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n`);
    // The head must have reached the server before the signal (nothing to await from outside).
    await new Promise((r) => setTimeout(r, 100));
    const stopping = reg.server.stop();
    await new Promise((r) => setTimeout(r, 400));
    const refused = await open(port).then(
      (s) => (s.destroy(), false),
      () => true,
    );
    socket.write('{}');
    const bodySentAt = performance.now();
    const { text, closedAt } = await answer;
    console.log(`[registry] in-flight create answered and its connection closed ${Math.round(closedAt - bodySentAt)} ms after its body`);
    await stopping;
    consumer.close();
    expect(text).toMatch(/^HTTP\/1\.1 201 /);
    expect(text).toContain('"tenant_id"');
    expect(refused, 'a new connection after the signal is refused').toBe(true);
  }, 60_000);

  it('gives in-flight requests the propagation bound and the database budget, within the 10 s shutdown deadline', () => {
    const base = { ADMIN_TOKEN: randomBytes(32).toString('base64url'), INTERNAL_TOKEN: randomBytes(32).toString('base64url'), SECRETS_KEY: randomBytes(32).toString('base64') };
    expect(httpGraceMs(loadConfig({ ...base, DATABASE_URL: 'postgres://u@h/db' }))).toBe(3000 + 3 * 600 + 1000);
    expect(httpGraceMs(loadConfig({ ...base, DATABASE_URL: 'postgres://u@h/db', PROPAGATION_TIMEOUT_MS: '60000' }))).toBe(8000);
  });
});
