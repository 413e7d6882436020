import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedEnv, type EmbeddedEnv, ManagedProcess, runCommand } from './support/processes';
import { fetchSecret, me, signWithJose, type CreatedTenant } from './support/host';
import { TestSocket } from './support/ws-client';

// The README's first command: `npm start` on the embedded default (no
// DATABASE_URL, no REDIS_URL, no secrets in the environment).
describe('npm start on the embedded default', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-embedded-'));
  let env: EmbeddedEnv;
  let proc: ManagedProcess | undefined;

  afterAll(async () => {
    await proc?.stop('SIGINT');
    rmSync(dataDir, { recursive: true, force: true });
  });

  const start = async () => {
    proc = new ManagedProcess('npm start', 'npm', ['start'], env);
    proc.start();
    await proc.waitForOutput('service-relay is running', 60_000);
  };

  it('starts every service, prints where they listen and where the admin token is, and serves the whole flow', async () => {
    env = await embeddedEnv(dataDir);
    env.VERIFIER_ADDR = `127.0.0.1:${env.VERIFIER_GRPC_PORT}`;
    env.REALTIME_URL = `http://127.0.0.1:${env.REALTIME_PORT}`;
    await start();
    expect(proc!.logs).toContain(`http://127.0.0.1:${env.GATEWAY_PORT}`);
    expect(proc!.logs).toContain(`ws://127.0.0.1:${env.GATEWAY_PORT}/ws`);
    expect(proc!.logs).toContain(`ws://127.0.0.1:${env.REALTIME_PORT}/ws`);
    expect(proc!.logs).toContain(join(dataDir, 'secrets.env'));
    // Readiness and metrics on the ops listeners the banner names; the public ports answer them 404 and keep /healthz.
    for (const [name, ops, pub] of [['gateway', env.GATEWAY_OPS_PORT, env.GATEWAY_PORT], ['realtime', env.REALTIME_OPS_PORT, env.REALTIME_PORT], ['registry', env.REGISTRY_OPS_PORT, env.REGISTRY_HTTP_PORT]] as const) {
      expect(proc!.logs).toContain(`${name} http://127.0.0.1:${ops}`);
      for (const path of ['/readyz', '/metrics']) {
        expect((await fetch(`http://127.0.0.1:${ops}${path}`)).status, `${name} ops ${path}`).toBe(200);
        const refused = await fetch(`http://127.0.0.1:${pub}${path}`);
        expect(refused.status, `${name} public ${path}`).toBe(404);
        expect(await refused.json()).toEqual({ errors: ['not_found'] });
      }
      expect((await fetch(`http://127.0.0.1:${pub}/healthz`)).status, `${name} public /healthz`).toBe(200);
    }
    expect(statSync(join(dataDir, 'secrets.env')).mode & 0o777).toBe(0o600);

    // The CLI finds the generated admin token through DATA_DIR.
    const created = await runCommand('npm', ['run', '--silent', 'admin', '--', 'create-tenant'], { DATA_DIR: dataDir, REGISTRY_URL: env.REGISTRY_URL });
    expect(created.code, created.stderr).toBe(0);
    const tenant = JSON.parse(created.stdout) as CreatedTenant;
    const gateway = `http://127.0.0.1:${env.GATEWAY_PORT}`;
    const res = await fetchSecret(gateway, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret);
    expect(res.status).toBe(200);
    const secret = ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    const token = await signWithJose(secret, tenant.tenant_id, randomUUID());
    expect((await me(gateway, token)).status).toBe(200);

    // One origin: the WebSocket goes through the gateway's port like the REST calls.
    const sock = await TestSocket.open(`ws://127.0.0.1:${env.GATEWAY_PORT}/ws`, token, true);
    sock.send({ type: 'subscribe', topic: `tenants/${tenant.tenant_id}/channels/general` });
    await sock.next((f) => f.type === 'subscribed');
    const posted = await fetch(`${gateway}/api/v1/channels/general/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"data":"hello"}',
    });
    expect(posted.status).toBe(201);
    expect((await sock.next((f) => f.type === 'message')).data).toBe('hello');
    // In one process the gateway hands the upgrade to realtime on the client's own socket (#34): no second socket, no copy.
    const gatewayMetrics = await (await fetch(`http://127.0.0.1:${env.GATEWAY_OPS_PORT}/metrics`)).text();
    expect(gatewayMetrics).toMatch(/^gateway_ws_upgrades_handed_off_total\{[^}]*\} 1$/m);

    // Per-tenant limits on the embedded default (#30): set with the CLI, in force at its answer.
    const limited = await runCommand('npm', ['run', '--silent', 'admin', '--', 'set-limits', tenant.tenant_id, '--set', 'publish_rate_per_s=1', '--set', 'publish_burst=2', '--set', 'max_message_bytes=10'], { DATA_DIR: dataDir, REGISTRY_URL: env.REGISTRY_URL });
    expect(limited.code, limited.stderr).toBe(0);
    const publish = (data: string) => fetch(`${gateway}/api/v1/channels/general/messages`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ data }) });
    const big = await publish('x'.repeat(9));
    expect([big.status, big.headers.get('x-relay-limit')]).toEqual([413, '10']);
    expect((await publish('hi')).status).toBe(201);
    const over = await publish('hi');
    expect([over.status, over.headers.get('x-relay-limit'), over.headers.get('retry-after')]).toEqual([429, '1', '1']);
    sock.send({ type: 'publish', topic: `tenants/${tenant.tenant_id}/channels/general`, data: 'ws', ref: 'limited' });
    expect(await sock.next((f) => f.ref === 'limited')).toMatchObject({ type: 'error', code: 'rate_limited', limit: 1 });

    // Ctrl-C (SIGINT to the process group): connections are closed as "going away" (realtime's
    // 1001 passes through the gateway, which the launcher stops after realtime) and every
    // service stops. npm itself then re-raises the signal (a shell shows 130), so the clean
    // stop is read from the launcher's own last line.
    await proc!.stop('SIGINT');
    expect(await sock.closed()).toBe(1001);
    expect(proc!.logs).toContain('service-relay stopped cleanly');

    // The tenant survives a restart on the same DATA_DIR.
    await start();
    const again = await fetchSecret(gateway, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret);
    expect(again.status).toBe(200);
    expect(((await again.json()) as { jwt_secret_primary: string }).jwt_secret_primary).toBe(secret);

    // Usage metering on the embedded database (PGlite): the 30 s flush interval never came, so
    // what the stop handed over is the final flush, and it was kept across the restart.
    const usage = await runCommand('npm', ['run', '--silent', 'admin', '--', 'usage', tenant.tenant_id, '--format', 'json'], { DATA_DIR: dataDir, REGISTRY_URL: env.REGISTRY_URL });
    expect(usage.code, usage.stderr).toBe(0);
    // Two REST publishes served ("hello", "hi"), both delivered; refused: the 9-byte message by its size, a REST and a WebSocket publish by the tenant rate.
    const totals = JSON.parse(usage.stdout).totals as { refusals: Record<string, number> };
    expect(totals).toMatchObject({ published: { rest: 2, ws: 0, host: 0, total: 2 }, deliveries: 2, bytes_in: Buffer.byteLength('"hello"') + Buffer.byteLength('"hi"'), peak_connections: 1 });
    expect(totals.refusals).toEqual({ payload_size: 1, tenant_publish_rate: 2 });
  });
});
