import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { WebhookEvent } from '../packages/host/src/index';
import { fetchSecret, signWithJose, type CreatedTenant } from './support/host';
import { freePort, ManagedProcess, runCommand } from './support/processes';
import { WebhookReceiver } from './support/webhook-receiver';
import { TestSocket } from './support/ws-client';

// Webhooks (#32) on the embedded default: `npm start` with no DATABASE_URL
// and no REDIS_URL, where realtime hands events to the registry's sender in
// the same process (the in-process bus and presence drivers). Realtime
// records a tenant's events only once an enabled endpoint wants them.
describe('webhooks on the embedded default', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-embedded-webhooks-'));
  let proc: ManagedProcess | undefined;
  let receiver: WebhookReceiver | undefined;
  afterAll(async () => {
    await proc?.stop('SIGINT');
    await receiver?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('an endpoint added while a user is in a channel gets what happens from its answer on; a tenant without endpoints records nothing', async () => {
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      GATEWAY_PORT: `${await freePort()}`,
      REALTIME_PORT: `${await freePort()}`,
      REGISTRY_HTTP_PORT: `${await freePort()}`,
      REGISTRY_GRPC_PORT: `${await freePort()}`,
      VERIFIER_GRPC_PORT: `${await freePort()}`,
      VERIFIER_HTTP_PORT: `${await freePort()}`,
      WEBHOOK_BATCH_WAIT_MS: '100',
    };
    env.REGISTRY_URL = `http://127.0.0.1:${env.REGISTRY_HTTP_PORT}`;
    env.REGISTRY_GRPC_ADDR = `127.0.0.1:${env.REGISTRY_GRPC_PORT}`;
    env.VERIFIER_ADDR = `127.0.0.1:${env.VERIFIER_GRPC_PORT}`;
    env.REALTIME_URL = `http://127.0.0.1:${env.REALTIME_PORT}`;
    receiver = await WebhookReceiver.start();
    proc = new ManagedProcess('npm start', 'npm', ['start'], env);
    proc.start();
    await proc.waitForOutput('service-relay is running', 60_000);
    const gateway = `http://127.0.0.1:${env.GATEWAY_PORT}`;
    const cli = (...args: string[]) => runCommand('npm', ['run', '--silent', 'admin', '--', ...args], { DATA_DIR: dataDir, REGISTRY_URL: env.REGISTRY_URL! });
    const tenant = async () => {
      const created = await cli('create-tenant');
      expect(created.code, created.stderr).toBe(0);
      const t = JSON.parse(created.stdout) as CreatedTenant;
      const secret = ((await (await fetchSecret(gateway, t.tenant_id, t.host_sync_client_id, t.host_sync_client_secret)).json()) as { jwt_secret_primary: string }).jwt_secret_primary;
      return { t, open: async (user: string) => TestSocket.open(`ws://127.0.0.1:${env.GATEWAY_PORT}/ws`, await signWithJose(secret, t.tenant_id, user), true) };
    };
    const request = async (s: TestSocket, type: 'subscribe' | 'unsubscribe', t: CreatedTenant, channel: string) => {
      const ref = randomUUID();
      s.send({ type, topic: `tenants/${t.tenant_id}/channels/${channel}`, ref });
      expect(await s.next((f) => f.ref === ref)).toMatchObject({ type: `${type}d` });
    };
    const room = 'presence:room';
    const [none, w] = [await tenant(), await tenant()];
    const [n, a, b] = [randomUUID(), randomUUID(), randomUUID()];

    // The tenant without endpoints: connect, join, leave, disconnect.
    const sn = await none.open(n);
    await request(sn, 'subscribe', none.t, room);
    await request(sn, 'unsubscribe', none.t, room);
    sn.close();
    await sn.closed();
    // A is in the room before the endpoint exists.
    const sa = await w.open(a);
    await request(sa, 'subscribe', w.t, room);
    // The CLI creates the endpoint; its answer means realtime records the tenant's events from now on.
    const created = await cli('webhooks', 'create', w.t.tenant_id, '--url', receiver.url, '--events', 'channel_occupied,channel_vacated,member_added,member_removed,user_connected,user_disconnected');
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ enabled: true, signing_secret: expect.stringMatching(/^whsec_/) });
    const sb = await w.open(b);
    await request(sb, 'subscribe', w.t, room);
    await request(sa, 'unsubscribe', w.t, room);
    await request(sb, 'unsubscribe', w.t, room);
    for (const s of [sa, sb]) s.close();
    await Promise.all([sa, sb].map((s) => s.closed()));
    const names: Record<string, string> = { [a]: 'A', [b]: 'B' };
    const events = () => {
      const seen = new Set<string>();
      return receiver!.delivered<WebhookEvent>().filter((e) => !seen.has(e.id) && (seen.add(e.id), true));
    };
    await receiver.until(() => events().filter((e) => e.type === 'user_disconnected').length === 2, 15_000);
    // Nothing more comes (the sender batches within 100 ms here).
    await new Promise((r) => setTimeout(r, 1000));
    expect(events().map((e) => `${e.type}:${e.channel ?? '-'}:${e.user_id === undefined ? '-' : (names[e.user_id] ?? '?')}`).sort()).toEqual(
      ['user_connected:-:B', `member_added:${room}:B`, `member_removed:${room}:A`, `member_removed:${room}:B`, `channel_vacated:${room}:-`, 'user_disconnected:-:A', 'user_disconnected:-:B'].sort(),
    );
    expect(events().every((e) => e.tenant_id === w.t.tenant_id)).toBe(true);
    // The in-process queue is in order: the first tenant's transitions, and the second's before its endpoint,
    // reached the sender before these. None was recorded (the sender counts what no endpoint wanted as unrouted).
    const res = await fetch(`${env.REGISTRY_URL}/metrics`);
    expect(res.status).toBe(200);
    const metrics = await res.text();
    expect(metrics).toMatch(/^relay_registry_webhook_events_total\{result="delivered"[^}]*\} [1-9]/m);
    expect(metrics).not.toMatch(/^relay_registry_webhook_events_total\{result="unrouted"[^}]*\} [1-9]/m);
  });
});
