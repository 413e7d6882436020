import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, type Browser } from '../support/browser';
import { freePort, ManagedProcess, REPO_ROOT } from '../support/processes';
import { startStack, type Stack } from '../support/stack';

const SCREENSHOT = join(REPO_ROOT, 'artifacts', 'browser-chat.png');
/** Short enough that the page refreshes its token twice within a test, long enough for 10 refreshes a minute at most. */
const TOKEN_TTL_S = 15;
const WAIT = { timeout: 20_000 };

/**
 * examples/chat in a real browser (Debian's chromium) against the distributed
 * deployment: two realtime instances, every service its own process. Every
 * assertion is on what a user sees on the page.
 */
describe('the chat example in chromium', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-chat-'));
  let stack: Stack;
  let chat: ManagedProcess;
  let browser: Browser;
  let chatUrl: string;
  let alice: Page;
  let bob: Page;

  beforeAll(async () => {
    stack = await startStack({ gatewayToBothRealtimes: true });
    const port = await freePort();
    chatUrl = `http://127.0.0.1:${port}/`;
    chat = new ManagedProcess('chat', process.execPath, ['--import', 'tsx', 'examples/chat/src/main.ts'], {
      // The page's WebSocket goes to the gateway's /ws, which hands upgrades to the realtime instances in turn.
      RELAY_URL: stack.gatewayUrl,
      REGISTRY_URL: stack.registryUrl,
      ADMIN_TOKEN: stack.adminToken,
      DATA_DIR: dataDir,
      CHAT_PORT: `${port}`,
      CHAT_TOKEN_TTL_S: `${TOKEN_TTL_S}`,
    });
    chat.start();
    await chat.waitForOutput('chat example on', 30_000);
    browser = await launchChromium();
  });

  afterAll(async () => {
    if (bob) {
      mkdirSync(join(REPO_ROOT, 'artifacts'), { recursive: true });
      await bob.screenshot({ path: SCREENSHOT, fullPage: true }).catch(() => undefined);
    }
    await browser?.close();
    await chat?.stop();
    await stack?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const text = (page: Page, id: string) => page.locator(`#${id}`).innerText();
  const waitText = (page: Page, id: string, value: string, timeout = WAIT.timeout) => page.locator(`#${id}`, { hasText: new RegExp(`^${value}$`) }).waitFor({ timeout });
  const messages = (page: Page) => page.locator('#messages li').allInnerTexts();
  const line = (page: Page, value: string) => page.locator('#messages li', { hasText: value });

  /** Every answer of 400 or more a page got, and every console error, until the first test ends (#29: no favicon 404). */
  const failedRequests: string[] = [];
  const consoleErrors: string[] = [];
  const join_ = async (name: string): Promise<Page> => {
    const page = await browser.context.newPage();
    page.on('response', (r) => void (r.status() >= 400 && failedRequests.push(`${r.status()} ${r.url()}`)));
    page.on('console', (m) => void (m.type() === 'error' && consoleErrors.push(m.text())));
    page.setDefaultTimeout(WAIT.timeout);
    await page.goto(chatUrl);
    await page.locator('#name').fill(name);
    await page.locator('#login button').click();
    await waitText(page, 'conn-state', 'connected');
    return page;
  };
  /** The realtime instance (realtime1 or realtime2) holding exactly `n` connections, from its own metrics. */
  const connections = async (name: string): Promise<number> => {
    const text = await (await fetch(stack.health[name]!.replace('/healthz', '/metrics'))).text();
    const m = /^relay_realtime_connections(?:\{[^}]*\})? (\d+)$/m.exec(text);
    if (!m) throw new Error(`${name} /metrics has no relay_realtime_connections:\n${text.slice(0, 500)}`);
    return Number(m[1]);
  };
  let bobOn: string;
  const say = async (page: Page, value: string) => {
    await page.locator('#text').fill(value);
    await page.locator('#send button').click();
  };

  it('two users of one tenant, on two realtime instances, chat through the example app', async () => {
    alice = await join_('alice');
    const aliceOn = (await connections('realtime1')) === 1 ? 'realtime1' : 'realtime2';
    bob = await join_('bob');
    bobOn = aliceOn === 'realtime1' ? 'realtime2' : 'realtime1';
    expect([await connections(aliceOn), await connections(bobOn)]).toEqual([1, 1]);
    await say(alice, 'hello from alice');
    await line(bob, 'hello from alice').waitFor(WAIT);
    await say(bob, 'hi alice, bob here');
    await line(alice, 'hi alice, bob here').waitFor(WAIT);
    for (const page of [alice, bob]) expect(await messages(page)).toEqual(['alice:hello from alice', 'bob:hi alice, bob here']);
    expect(await text(bob, 'me')).toBe('bob');
    // Nothing on either page a developer must wonder about: no 404 (a favicon), no console error.
    expect(failedRequests).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });

  it("bob's token is refreshed in place, past the first token's expiry, on the connection he opened", async () => {
    // Two refreshes take longer than the first token lived: without them realtime would have closed it (4401).
    await waitText(bob, 'refresh-count', '2', 2 * TOKEN_TTL_S * 1000);
    expect(await text(bob, 'conn-count')).toBe('1');
    expect(await text(bob, 'conn-state')).toBe('connected');
    await say(alice, 'still there?');
    await line(bob, 'still there?').waitFor(WAIT);
    expect(await text(bob, 'conn-count')).toBe('1');
  });

  it('bob loses his realtime instance, reconnects, and sees every message sent meanwhile exactly once', async () => {
    // Bob's page asks the host for a token before it reconnects: held here until the messages below
    // are sent, so they are sent while he is away (the gateway would otherwise reconnect him at once).
    let release!: () => void;
    const away = new Promise<void>((resolve) => (release = resolve));
    await bob.route('**/api/token', async (route) => {
      await away;
      await route.continue();
    });
    await stack.processes[bobOn]!.stop('SIGKILL');
    await waitText(bob, 'conn-state', 'reconnecting');
    const meanwhile = ['while bob was away 1', 'while bob was away 2', 'while bob was away 3'];
    for (const m of meanwhile) {
      await say(alice, m);
      await line(alice, m).waitFor(WAIT);
    }
    // Typed while offline: sent once the connection is back.
    await say(bob, 'bob is back');

    release();
    await waitText(bob, 'conn-state', 'connected');
    expect(await text(bob, 'conn-count')).toBe('2');
    await line(bob, meanwhile.at(-1)!).waitFor(WAIT);
    await line(alice, 'bob is back').waitFor(WAIT);
    await line(bob, 'bob is back').waitFor(WAIT);

    const expected = ['alice:hello from alice', 'bob:hi alice, bob here', 'alice:still there?', ...meanwhile.map((m) => `alice:${m}`), 'bob:bob is back'];
    expect(await messages(bob)).toEqual(expected);
    expect(await messages(alice)).toEqual(expected);
    expect(await text(alice, 'conn-count')).toBe('1');
  });
});
