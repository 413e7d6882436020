import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, type Browser } from '../support/browser';
import { createTenantWithSecret, fetchSecret, me, signWithJose, type CreatedTenant } from '../support/host';
import { REPO_ROOT } from '../support/processes';
import { startStack, type Stack } from '../support/stack';
import { TestSocket } from '../support/ws-client';

const DIST = join(REPO_ROOT, 'packages', 'console', 'dist');
const ARTIFACTS = join(REPO_ROOT, 'artifacts');
const WAIT = { timeout: 15_000 };
/** The Live page's refresh (packages/console/src/pages/live.tsx) plus a margin for a loaded machine. */
const LIVE_WITHIN_MS = 3000 + 4000;
/** The canvas as the page script below uses it (the tests' type-check has no DOM types). */
interface CanvasLike {
  width: number;
  height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } };
}

const ANY_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';

/**
 * The operator console (#31) in Debian's chromium against the distributed
 * deployment (every service its own process, two realtime instances, the
 * registry reading both for Live). Every assertion is on what the operator
 * sees, or on what the gateway and a live WebSocket do after a click.
 */
describe('the operator console in chromium', () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  let consoleUrl: string;
  const consoleErrors: string[] = [];
  /** The tenant the console created and acted on. */
  let made: { tenantId: string; clientId: string; secret: string };
  /** A tenant made with the CLI, with live traffic (Live, Usage). */
  let busy: { tenant: CreatedTenant; secret: string };

  beforeAll(async () => {
    stack = await startStack({
      registryEnv: (ports) => ({ REALTIME_URL: ports.realtime.map((p) => `http://127.0.0.1:${p}`).join(',') }),
      realtimeEnv: { USAGE_FLUSH_INTERVAL_S: '1' },
    });
    consoleUrl = `${stack.registryUrl}/console/`;
    browser = await launchChromium();
    page = await browser.context.newPage();
    page.setDefaultTimeout(WAIT.timeout);
    // A CSP violation is reported on the console as an error: there must be none.
    page.on('console', (m) => void (m.type() === 'error' && !/status of 40[01]/.test(m.text()) && consoleErrors.push(m.text())));
    page.on('pageerror', (e) => void consoleErrors.push(e.message));
  });

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  const adminJson = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.registryUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.adminToken}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const confirm = async (id: string) => {
    await page.locator(`#${id}`).click();
    const dialog = page.locator('dialog[open]');
    await dialog.waitFor();
    await dialog.locator('button.confirm').click();
  };
  /** The answer to the action labelled `what` (the console clears the previous one before each call). */
  const answerTo = (what: string) => page.locator(`section[aria-label="Actions"] .answer[data-what="${what}"] .meaning`);

  it('serves no data and no API without the admin token: every admin path refuses, the static files are the built bytes under a strict CSP', async () => {
    const id = ANY_ID;
    const adminPaths: Array<[string, string]> = [
      ['GET', '/admin/tenants'],
      ['POST', '/admin/tenants'],
      ['GET', `/admin/tenants/${id}`],
      ['PATCH', `/admin/tenants/${id}`],
      ['DELETE', `/admin/tenants/${id}`],
      ...['disable', 'enable', 'jwt_secret/rotate', 'jwt_secret/expire_previous', 'jwt_secret/revoke_all', 'host_sync/rotate'].map((p): [string, string] => ['POST', `/admin/tenants/${id}/${p}`]),
      ['GET', `/admin/tenants/${id}/channel_rules`],
      ['PUT', `/admin/tenants/${id}/channel_rules`],
      ['DELETE', `/admin/tenants/${id}/channel_rules`],
      ['GET', `/admin/tenants/${id}/limits`],
      ['PUT', `/admin/tenants/${id}/limits`],
      ['PATCH', `/admin/tenants/${id}/limits`],
      ['GET', '/admin/plans'],
      ['GET', '/admin/plans/pro'],
      ['PUT', '/admin/plans/pro'],
      ['DELETE', '/admin/plans/pro'],
      ['POST', `/admin/tenants/${id}/users/u1/revoke_tokens`],
      ['POST', `/admin/tenants/${id}/users/u1/disconnect`],
      ['POST', '/admin/explain_token'],
      ['GET', `/admin/tenants/${id}/usage`],
      ['GET', '/admin/usage'],
      ['GET', '/admin/live'],
      ['GET', '/admin/audit'],
      ['GET', '/admin/anything-else'],
    ];
    for (const auth of [undefined, 'Bearer not-the-admin-token', `Bearer ${stack.adminToken}x`]) {
      for (const [method, path] of adminPaths) {
        const res = await fetch(`${stack.registryUrl}${path}`, { method, headers: auth ? { authorization: auth } : {} });
        expect(res.status, `${method} ${path}`).toBe(401);
        expect(await res.text()).toBe('{"errors":["invalid_admin_token"]}');
      }
    }
    // The console's files: public on the admin listener, byte for byte what the repository builds (no data, no secret).
    const built = ['index.html', ...readdirSync(join(DIST, 'assets')).map((f) => `assets/${f}`)];
    for (const file of built) {
      const res = await fetch(`${consoleUrl}${file}`);
      expect(res.status, file).toBe(200);
      expect(res.headers.get('content-security-policy')).toMatch(/^default-src 'none'; script-src 'self'; style-src 'self';.*connect-src 'self';.*frame-ancestors 'none'/);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('set-cookie')).toBeNull();
      const bytes = Buffer.from(await res.arrayBuffer());
      expect(bytes.equals(readFileSync(join(DIST, file))), file).toBe(true);
      expect(bytes.includes(stack.adminToken)).toBe(false);
    }
    expect(await (await fetch(consoleUrl)).text()).toBe(readFileSync(join(DIST, 'index.html'), 'utf8'));
    expect((await fetch(`${stack.registryUrl}/console`, { redirect: 'manual' })).headers.get('location')).toBe('/console/');
    for (const path of ['/console/nope.js', '/console/assets/', '/console/../admin/tenants', '/console/%2e%2e/admin/tenants']) {
      expect((await fetch(`${stack.registryUrl}${path}`)).status, path).not.toBe(200);
    }
    const post = await fetch(consoleUrl, { method: 'POST' });
    expect(post.status).toBe(405);
  });

  it('refuses a wrong admin token at sign-in and takes the right one, kept for the tab only', async () => {
    await page.goto(consoleUrl);
    await page.locator('#admin-token').fill('not-the-admin-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.locator('#signin-error').innerText()).toContain('invalid_admin_token');
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    await page.screenshot({ path: join(ARTIFACTS, 'console-signin-refused-1280.png') }).catch(() => undefined);
    await page.locator('#admin-token').fill(stack.adminToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Tenants' }).waitFor();
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(await page.evaluate('localStorage.length')).toBe(0);
  });

  it('creates a tenant and shows its host-sync credential once', async () => {
    await page.locator('details.create summary').click();
    await page.locator('#create-tenant input[name=name]').fill('Console Co');
    await page.locator('#create-tenant input[name=labels]').fill('team=console, tier=gold');
    await page.locator('#create-tenant button[type=submit]').click();
    const credential = page.locator('section.credential');
    await credential.waitFor();
    expect(await credential.locator('.warning').innerText()).toMatch(/not be shown again/);
    const clientId = await credential.locator('.client-id').innerText();
    const secret = await credential.locator('.secret').innerText();
    expect(secret.length).toBeGreaterThanOrEqual(32);
    const row = page.locator('tr', { hasText: 'Console Co' });
    await row.waitFor();
    const tenantId = (await row.getAttribute('data-tenant'))!;
    made = { tenantId, clientId, secret };
    // The credential works (the host's fetch through the gateway) ...
    expect((await fetchSecret(stack.gatewayUrl, tenantId, clientId, secret)).status).toBe(200);
    await page.screenshot({ path: join(ARTIFACTS, 'console-tenant-created-1280.png'), fullPage: true });
    // ... and once dismissed it is nowhere, on this page or the tenant's.
    await credential.getByRole('button', { name: 'I have stored it' }).click();
    await row.getByRole('link').click();
    await page.locator('#tenant-id', { hasText: tenantId }).waitFor();
    expect(await page.content()).not.toContain(secret);
    await page.goto(`${consoleUrl}#/tenants`);
    await page.locator('#tenant-search').fill('console');
    await page.locator('#tenant-label').fill('team=console');
    await page.locator('#tenant-state').selectOption('enabled');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.locator('tbody tr[data-tenant]').count()).toBe(1);
    expect(await page.content()).not.toContain(secret);
  });

  it('rotates, revokes all and disables: each click is in force at the gateway and on a live WebSocket (4401)', async () => {
    const sign = async (clientSecret: string) => {
      const res = await fetchSecret(stack.gatewayUrl, made.tenantId, made.clientId, clientSecret);
      expect(res.status).toBe(200);
      return signWithJose(((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary, made.tenantId, randomUUID());
    };
    const first = await sign(made.secret);
    const probe = await me(stack.gatewayUrl, first);
    expect(probe.status, await probe.clone().text()).toBe(200);
    const ws1 = await TestSocket.open(`${stack.gatewayUrl.replace('http', 'ws')}/ws`, first, true);
    await page.goto(`${consoleUrl}#/tenants/${made.tenantId}`);
    await page.locator('#tenant-keys', { hasText: 'primary only' }).waitFor();

    // Rotate: the old primary becomes the previous; its token still works.
    await confirm('action-rotate');
    await answerTo('Rotate signing key').filter({ hasText: 'in force everywhere' }).waitFor();
    await page.locator('#tenant-keys', { hasText: 'primary + previous' }).waitFor();
    expect((await me(stack.gatewayUrl, first)).status).toBe(200);

    // Revoke all: refused at once, the live socket closed 4401, a new host-sync secret shown once.
    await confirm('action-revoke-all');
    await answerTo('Revoke all keys').filter({ hasText: 'in force everywhere' }).waitFor();
    expect((await me(stack.gatewayUrl, first)).status).toBe(401);
    expect(await ws1.closed()).toBe(4401);
    const newSecret = await page.locator('section.credential .secret').innerText();
    expect(newSecret).not.toBe(made.secret);
    expect((await fetchSecret(stack.gatewayUrl, made.tenantId, made.clientId, made.secret)).status).toBe(401);
    await page.locator('section.credential').getByRole('button', { name: 'I have stored it' }).click();

    // Disable: a token on the new key is refused and its socket closed 4401.
    const second = await sign(newSecret);
    const ws2 = await TestSocket.open(`${stack.gatewayUrl.replace('http', 'ws')}/ws`, second, true);
    await confirm('action-disable');
    await answerTo('Disable').filter({ hasText: 'in force everywhere' }).waitFor();
    await page.locator('#tenant-state-badge', { hasText: 'disabled' }).waitFor();
    expect(await ws2.closed()).toBe(4401);
    expect((await me(stack.gatewayUrl, second)).status).toBe(401);
    expect(await page.locator('section[aria-label="Actions"] .answer .status').innerText()).toBe('200');
  });

  it('edits channel rules and limits, showing the API’s own message for an invalid edit', async () => {
    const badRules = '{"default":["subscribe","fly"]}';
    const api = await adminJson('PUT', `/admin/tenants/${made.tenantId}/channel_rules`, badRules);
    expect(api.status).toBe(400);
    await page.locator('#rules-text').fill(badRules);
    await page.locator('#rules-save').click();
    const rulesAnswer = page.locator('section[aria-labelledby="rules-title"] .answer .meaning');
    await rulesAnswer.filter({ hasText: String(api.body.problem) }).waitFor();
    expect(await rulesAnswer.innerText()).toBe(`Refused: invalid_channel_rules — ${String(api.body.problem)}`);
    await page.locator('#rules-text').fill('{"default":["subscribe","history"],"channels":[{"pattern":"chat:*","actions":["subscribe","publish","history"]}]}');
    await page.locator('#rules-save').click();
    await rulesAnswer.filter({ hasText: 'in force everywhere' }).waitFor();
    expect((await adminJson('GET', `/admin/tenants/${made.tenantId}/channel_rules`)).body.version).toBe(1);

    const limits = page.locator('#limits-form');
    await limits.locator('input[name=max_message_bytes]').fill('999999');
    await page.locator('#limits-save').click();
    const limitsAnswer = page.locator('section[aria-labelledby="limits-title"] .answer .meaning');
    await limitsAnswer.filter({ hasText: 'Refused: invalid_limits' }).waitFor();
    const direct = await adminJson('PUT', `/admin/tenants/${made.tenantId}/limits`, { plan: null, overrides: { max_message_bytes: 999999 } });
    expect(await limitsAnswer.innerText()).toBe(`Refused: invalid_limits — ${String(direct.body.problem)}`);
    await limits.locator('input[name=max_message_bytes]').fill('');
    await limits.locator('input[name=max_connections]').fill('50');
    await page.locator('#limits-save').click();
    await limitsAnswer.filter({ hasText: 'in force everywhere' }).waitFor();
    expect(((await adminJson('GET', `/admin/tenants/${made.tenantId}/limits`)).body.overrides as Record<string, number>).max_connections).toBe(50);
    await page.screenshot({ path: join(ARTIFACTS, 'console-tenant-edited-1280.png'), fullPage: true });
  });

  it('shows a new live connection on the Live page within its refresh interval', async () => {
    busy = await createTenantWithSecret(stack);
    await page.goto(`${consoleUrl}#/live`);
    await page.locator('#live-instances-body tr').nth(1).waitFor();
    const row = page.locator(`#live-tenants-body tr[data-tenant="${busy.tenant.tenant_id}"]`);
    expect(await row.count()).toBe(0);
    const token = await signWithJose(busy.secret, busy.tenant.tenant_id, randomUUID());
    const viaGateway = await TestSocket.open(`${stack.gatewayUrl.replace('http', 'ws')}/ws`, token, true);
    const opened = Date.now();
    await row.waitFor({ timeout: LIVE_WITHIN_MS });
    expect(Date.now() - opened).toBeLessThan(LIVE_WITHIN_MS);
    expect(await row.locator('td.num').innerText()).toBe('1');
    // Every feed consumer (2 verifiers, 2 realtime, the gateway) is listed, none behind.
    await expect.poll(() => page.locator('#live-feed-body tr').count(), WAIT).toBeGreaterThanOrEqual(5);
    viaGateway.close();
  });

  it('draws the usage chart from the traffic the test sent', async () => {
    const token = await signWithJose(busy.secret, busy.tenant.tenant_id, randomUUID());
    const SENT = 7;
    for (let i = 0; i < SENT; i++) {
      const res = await fetch(`${stack.gatewayUrl}/api/v1/channels/news/messages`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ data: { i } }) });
      expect(res.status).toBe(201);
    }
    // Flushed every second (USAGE_FLUSH_INTERVAL_S=1): bounded wait until the registry has all of it.
    await expect
      .poll(async () => ((await adminJson('GET', `/admin/tenants/${busy.tenant.tenant_id}/usage`)).body.totals as { published: { total: number } }).published.total, { timeout: 15_000, interval: 500 })
      .toBe(SENT);
    await page.goto(`${consoleUrl}#/usage?tenant=${busy.tenant.tenant_id}`);
    const chart = page.locator('#chart-messages');
    await chart.locator('canvas').waitFor();
    expect(await chart.getAttribute('data-total')).toBe(String(SENT));
    expect(Number(await chart.getAttribute('data-points'))).toBeGreaterThanOrEqual(1);
    // The canvas has the series' colour on it: uPlot drew the points.
    const drawn = await chart.locator('canvas').evaluate((el) => {
      const c = el as unknown as CanvasLike;
      const { data } = c.getContext('2d').getImageData(0, 0, c.width, c.height);
      let blue = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i + 2]! > 200 && data[i]! < 80 && data[i + 3]! > 200) blue++;
      return blue;
    });
    expect(drawn).toBeGreaterThan(10);
  });

  it('filters the audit log to the actions this test took, newest first', async () => {
    await page.goto(`${consoleUrl}#/audit?tenant_id=${made.tenantId}`);
    await page.locator('#audit-actions').fill('rotate, revoke_all, disable');
    await page.locator('#audit-outcome').selectOption('ok');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.locator('#audit-body tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-action')))).toEqual(['disable', 'revoke_all', 'rotate']);
    await page.locator('#audit-actions').fill('set_channel_rules');
    await page.locator('#audit-outcome').selectOption('refused');
    await page.getByRole('button', { name: 'Apply' }).click();
    // The console's invalid edit and this test's own direct one.
    await expect.poll(() => page.locator('#audit-body tr').count()).toBe(2);
  });

  it('takes a screenshot of every page at 1280 and 390 px, with no console error on any', async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const pages: Array<[string, string, string]> = [
      ['tenants', '#/tenants', 'tbody tr[data-tenant]'],
      ['tenant', `#/tenants/${made.tenantId}`, '#limits-form'],
      ['live', '#/live', '#live-feed-body tr'],
      ['usage', `#/usage?tenant=${busy.tenant.tenant_id}`, '#chart-messages canvas'],
      ['audit', `#/audit?tenant_id=${made.tenantId}`, '#audit-body tr'],
    ];
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width === 1280 ? 900 : 844 });
      for (const [name, hash, ready] of pages) {
        await page.goto(`${consoleUrl}${hash}`);
        await page.reload();
        await page.locator(ready).first().waitFor();
        // Nothing wider than the screen but the tables, which scroll in their own box.
        const overflow = Number(await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth'));
        expect(overflow, `${name} at ${width}`).toBeLessThanOrEqual(0);
        await page.screenshot({ path: join(ARTIFACTS, `console-${name}-${width}.png`), fullPage: true });
      }
    }
    await page.evaluate('sessionStorage.clear()');
    await page.goto(`${consoleUrl}#/tenants`);
    await page.reload();
    await page.locator('#admin-token').waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'console-signin-390.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  });
});
