import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { callUnary, grpcStatusOf, internalClient, internalMetadata, REGISTRY_USAGE_PROTO, REGISTRY_USAGE_SERVICE, type UnaryMethod, type UsageFlushRequest, type UsageFlushResponse, type UsageRowMessage } from '@service-relay/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdminCli } from '../cli/commands';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';
import { describeAdminCall } from './admin-call';

const HOUR = 3_600_000;

/** The usage path on the embedded default (PGlite): realtime's flush over gRPC, the admin reads, the CLI. */
describe('usage on the embedded registry', () => {
  let reg: TestRegistry;
  let client: grpc.Client & { Flush: UnaryMethod<UsageFlushRequest, UsageFlushResponse> };
  let tenantId: string;
  const hour = Date.now() - (Date.now() % HOUR);

  beforeAll(async () => {
    reg = await startTestRegistry({ logLevel: 'warn' });
    client = internalClient(REGISTRY_USAGE_PROTO, REGISTRY_USAGE_SERVICE, `127.0.0.1:${reg.server.grpcPort}`);
    tenantId = ((await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string }).tenant_id;
  });
  afterAll(async () => {
    client?.close();
    await reg?.stop();
  });

  const row = (over: Partial<UsageRowMessage> = {}): UsageRowMessage => ({
    tenant_id: tenantId,
    hour_ms: hour,
    published_rest: 1,
    published_ws: 2,
    published_host: 3,
    deliveries: 12,
    bytes_in: 60,
    bytes_out: 900,
    peak_connections: 2,
    connection_ms: 90_000,
    refusals: [{ limit: 'publish_rate', count: 1 }],
    ...over,
  });
  const flush = (req: UsageFlushRequest, token = reg.internalToken) => callUnary(client.Flush.bind(client), req, internalMetadata(token), { deadlineMs: 5000, what: 'flush' });

  it('applies a flush once per id, refuses a wrong token and a malformed flush', async () => {
    const req = { flush_id: 'rt-1:1', instance_id: 'rt-1', rows: [row()] };
    expect(await flush(req)).toEqual({ duplicate: false });
    expect(await flush(req)).toEqual({ duplicate: true });
    expect(grpcStatusOf(await flush({ ...req, flush_id: 'rt-1:2' }, 'x'.repeat(40)).catch((e: unknown) => e))).toBe(grpc.status.UNAUTHENTICATED);
    expect(grpcStatusOf(await flush({ flush_id: 'rt-1:3', instance_id: 'rt-1', rows: [row({ hour_ms: hour + 1 })] }).catch((e: unknown) => e))).toBe(grpc.status.INVALID_ARGUMENT);
    const res = await reg.admin('GET', `/admin/tenants/${tenantId}/usage`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { totals: Record<string, unknown>; buckets: Array<{ start: string }>; granularity: string };
    expect(body.granularity).toBe('hour');
    expect(body.totals).toEqual({
      published: { rest: 1, ws: 2, host: 3, total: 6 },
      deliveries: 12,
      bytes_in: 60,
      bytes_out: 900,
      peak_connections: 2,
      connection_minutes: 1.5,
      refusals: { publish_rate: 1 },
    });
    expect(body.buckets.map((b) => b.start)).toEqual([new Date(hour).toISOString()]);
  });

  it('answers bad queries with invalid_query and a problem, an unknown tenant with 404, and audits the reads', async () => {
    for (const q of ['granularity=minute', 'from=2030-01-01', 'from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z', 'from=2000-01-01T00:00:00Z&to=2030-01-01T00:00:00Z']) {
      const res = await reg.admin('GET', `/admin/tenants/${tenantId}/usage?${q}`);
      expect(res.status, q).toBe(400);
      expect(await res.json()).toMatchObject({ errors: ['invalid_query'], problem: expect.any(String) });
    }
    expect((await reg.admin('GET', `/admin/tenants/${randomUUID()}/usage`)).status).toBe(404);
    expect((await reg.admin('POST', `/admin/tenants/${tenantId}/usage`)).status).toBe(405);
    expect((await reg.admin('GET', '/admin/usage?sort=bytes_out&limit=0')).status).toBe(400);
    const audit = (await (await reg.admin('GET', `/admin/audit?tenant_id=${tenantId}`)).json()) as { entries: Array<{ action: string }> };
    expect(audit.entries.map((e) => e.action)).toContain('tenant_usage');
    expect(describeAdminCall('GET', '/usage')).toEqual({ action: 'usage', tenantId: null });
    expect(describeAdminCall('GET', `/tenants/${tenantId}/usage`)).toEqual({ action: 'tenant_usage', tenantId });
    expect(describeAdminCall('POST', `/tenants/${tenantId}/usage`)).toEqual({ action: 'unknown', tenantId });
  });

  it('the CLI prints one tenant and every tenant as a table, CSV or JSON, and refuses a bad format', async () => {
    const run = async (argv: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runAdminCli(argv, { registryUrl: reg.baseUrl, adminToken: reg.adminToken, secretsFile: '/nowhere' }, { out: (t) => out.push(t), err: (t) => err.push(t) });
      return { code, stdout: out.join('\n'), stderr: err.join('\n') };
    };
    const csv = await run(['usage', tenantId, '--format', 'csv']);
    expect(csv.code, csv.stderr).toBe(0);
    expect(csv.stdout.split('\n')).toEqual([
      'tenant_id,start,published_rest,published_ws,published_host,deliveries,bytes_in,bytes_out,peak_connections,connection_minutes,refusals',
      `${tenantId},${new Date(hour).toISOString()},1,2,3,12,60,900,2,1.5,publish_rate=1`,
    ]);
    const table = await run(['usage', '--granularity', 'day', '--sort', 'deliveries']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^tenant_id\s+start\s+published_rest/);
    expect(table.stdout).toContain(tenantId);
    const json = await run(['usage', tenantId, '--format', 'json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ tenant_id: tenantId, totals: { deliveries: 12 } });
    expect((await run(['usage', tenantId, '--format', 'xml'])).code).toBe(2);
    expect((await run(['usage', tenantId, '--sort', 'deliveries'])).code).toBe(2);
    const bad = await run(['usage', tenantId, '--granularity', 'week']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('granularity is hour or day');
  });
});
