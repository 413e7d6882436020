import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { signToken } from '@service-relay/testkit';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, type Browser } from '../support/browser';
import { createTenantWithSecret } from '../support/host';
import { startStack, type Stack } from '../support/stack';

const FIVE_MIB = 5 * 1024 * 1024;
const TOO_LARGE = '{"errors":["payload_too_large"]}';

// #29 item 5, in a real browser (Debian's chromium) and with Node's fetch,
// against the distributed deployment: a page on an allowed origin publishes
// with the Idempotency-Key API.md tells it to send, and an over-limit body is
// answered with a 413 the client reads, not a reset.
describe('browsers and fetch clients get the documented answers', () => {
  let stack: Stack;
  let browser: Browser;
  let site: Server;
  let page: Page;
  let token: string;

  beforeAll(async () => {
    site = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>host app</title>'));
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    stack = await startStack({ gatewayEnv: { CORS_ORIGINS: origin } });
    const { tenant, secret } = await createTenantWithSecret(stack);
    token = signToken({ secret, tenantId: tenant.tenant_id, userId: randomUUID(), expiresIn: 600 });
    browser = await launchChromium();
    page = await browser.context.newPage();
    await page.goto(`${origin}/`);
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    site?.close();
  });

  it('chromium: a cross-origin publish with Idempotency-Key passes the preflight, and its retry is the same message', async () => {
    const answers = await page.evaluate(
      async ({ url, token }) => {
        const publish = () =>
          fetch(url, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': 'order-42', 'x-request-id': 'browser-1' },
            body: JSON.stringify({ data: { text: 'hi' } }),
          }).then(
            async (res) => ({ status: res.status, body: await res.json(), requestId: res.headers.get('x-request-id') }),
            (err: Error) => ({ status: 0, body: String(err), requestId: null }),
          );
        return [await publish(), await publish()];
      },
      { url: `${stack.gatewayUrl}/api/v1/channels/general/messages`, token },
    );
    expect(answers[0]).toMatchObject({ status: 201, requestId: 'browser-1' });
    expect(answers[1]).toMatchObject({ status: 201 });
    expect((answers[1]!.body as { id: string }).id).toBe((answers[0]!.body as { id: string }).id);
  });

  it('chromium: 20 of 20 POSTs of a 5 MiB body read the 413 and its JSON', async () => {
    const answers = await page.evaluate(
      async ({ url, token, size }) => {
        const body = 'x'.repeat(size);
        const out: Array<{ status: number; body: string }> = [];
        for (let i = 0; i < 20; i++) {
          out.push(
            await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body }).then(
              async (res) => ({ status: res.status, body: await res.text() }),
              (err: Error) => ({ status: 0, body: String(err) }),
            ),
          );
        }
        return out;
      },
      { url: `${stack.gatewayUrl}/api/v1/channels/general/messages`, token, size: FIVE_MIB },
    );
    expect(answers.filter((a) => a.status === 413 && a.body === TOO_LARGE), JSON.stringify(answers.filter((a) => a.status !== 413).slice(0, 3))).toHaveLength(20);
  });

  it('Node fetch: 20 of 20 POSTs of a 5 MiB body read the 413, on the tenant API and the host API', async () => {
    const body = Buffer.alloc(FIVE_MIB, 'x');
    const answers: Array<{ status: number | string; body: string }> = [];
    for (let i = 0; i < 20; i++) {
      const path = i % 2 === 0 ? '/api/v1/channels/general/messages' : `/api/host/tenants/${randomUUID()}/messages`;
      answers.push(
        await fetch(`${stack.gatewayUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body }).then(
          async (res) => ({ status: res.status, body: await res.text() }),
          (err: Error & { cause?: { code?: string } }) => ({ status: err.cause?.code ?? err.message, body: '' }),
        ),
      );
    }
    expect(answers.filter((a) => a.status === 413 && a.body === TOO_LARGE), JSON.stringify(answers.filter((a) => a.status !== 413))).toHaveLength(20);
  });
});
