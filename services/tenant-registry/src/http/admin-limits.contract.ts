import * as grpc from '@grpc/grpc-js';
import { internalClient, internalMetadata, REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, type TenantLimitsRequest, type TenantLimitsResponse, type UnaryMethod } from '@service-relay/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

type LimitsClient = grpc.Client & { TenantLimits: UnaryMethod<TenantLimitsRequest, TenantLimitsResponse> };
const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * Plans and per-tenant limits (#30): the admin API, the `limits` feed changes
 * and the TenantLimits RPC, on every database: admin-limits.test.ts (PGlite),
 * admin-limits.int.test.ts (PostgreSQL).
 */
export function limitsApiContract(driver: string, env: () => Promise<{ env: Record<string, string>; destroy(): Promise<void> }>): void {
  describe(`plans and tenant limits admin API on ${driver}`, () => {
    let reg: TestRegistry;
    let destroy: () => Promise<void> = async () => {};
    let rpc: LimitsClient;
    const create = async () => ((await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string }).tenant_id;
    const call = (method: string, path: string, body?: unknown) => reg.admin(method, path, { headers: JSON_HEADERS, ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }) });
    const limitsEvents = (id: string) => reg.events.filter((e) => e.tenant_id === id && e.kind === 'limits').map((e) => e.detail);
    const ask = (tenantId: string) =>
      new Promise<TenantLimitsResponse>((resolve, reject) => rpc.TenantLimits({ tenant_id: tenantId }, internalMetadata(reg.internalToken), { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res!))));

    beforeAll(async () => {
      const db = await env();
      destroy = db.destroy;
      reg = await startTestRegistry({ env: { PROPAGATION_TIMEOUT_MS: '600', ...db.env }, logLevel: 'warn' });
      rpc = internalClient(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, `127.0.0.1:${reg.server.grpcPort}`);
    });
    afterAll(async () => {
      rpc?.close();
      await reg?.stop();
      await destroy();
    });

    it('a tenant starts with nothing set (version 0: the environment defaults), and the RPC says so', async () => {
      const id = await create();
      const res = await reg.admin('GET', `/admin/tenants/${id}/limits`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ tenant_id: id, plan: null, overrides: {}, limits: {}, limits_version: 0 });
      expect(await ask(id)).toMatchObject({ found: true, limits_json: '{}' });
      expect(await ask('6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50')).toMatchObject({ found: false });
    });

    it('plan <- overrides: PUT, PATCH (null unsets), a plan change reaching every tenant on it, each 200 after the feed consumer applied it', async () => {
      const [a, b] = [await create(), await create()];
      const plan = `pro-${driver.toLowerCase()}`;
      expect((await call('PUT', `/admin/plans/${plan}`, { limits: { max_connections: 50, publish_rate_per_s: 20 } })).status).toBe(201);
      const setA = await call('PUT', `/admin/tenants/${a}/limits`, { plan, overrides: { publish_rate_per_s: 30, max_message_bytes: 1024 } });
      expect(setA.status).toBe(200);
      expect(await setA.json()).toEqual({ tenant_id: a, plan, overrides: { publish_rate_per_s: 30, max_message_bytes: 1024 }, limits: { max_connections: 50, publish_rate_per_s: 30, max_message_bytes: 1024 }, limits_version: 1 });
      expect((await call('PATCH', `/admin/tenants/${b}/limits`, { plan })).status).toBe(200);
      const patched = await call('PATCH', `/admin/tenants/${a}/limits`, { overrides: { max_message_bytes: null, max_subscriptions: 5 } });
      expect(await patched.json()).toMatchObject({ overrides: { publish_rate_per_s: 30, max_subscriptions: 5 }, limits_version: 2 });
      // The plan changes: both tenants get a limits change before the 200.
      const changed = await call('PUT', `/admin/plans/${plan}`, { limits: { max_connections: 7 } });
      expect(changed.status).toBe(200);
      expect(await changed.json()).toMatchObject({ name: plan, limits: { max_connections: 7 }, version: 2, tenants: 2 });
      expect(limitsEvents(a).at(-1)).toEqual({ limits: { max_connections: 7, publish_rate_per_s: 30, max_subscriptions: 5 }, limits_version: 3, plan });
      expect(limitsEvents(b)).toEqual([
        { limits: { max_connections: 50, publish_rate_per_s: 20 }, limits_version: 1, plan },
        { limits: { max_connections: 7 }, limits_version: 2, plan },
      ]);
      expect(JSON.parse((await ask(b)).limits_json)).toEqual({ max_connections: 7 });
      const list = (await (await reg.admin('GET', '/admin/plans')).json()) as { plans: Array<{ name: string; tenants: number }> };
      expect(list.plans.find((p) => p.name === plan)).toMatchObject({ tenants: 2 });
      // A plan in use is not deleted; once no tenant is on it, it is.
      const inUse = await reg.admin('DELETE', `/admin/plans/${plan}`);
      expect(inUse.status).toBe(409);
      expect(await inUse.json()).toMatchObject({ errors: ['plan_in_use'], tenants: 2 });
      for (const id of [a, b]) expect((await call('PATCH', `/admin/tenants/${id}/limits`, { plan: null })).status).toBe(200);
      expect(limitsEvents(b).at(-1)).toEqual({ limits: {}, limits_version: 3, plan: null });
      expect((await reg.admin('DELETE', `/admin/plans/${plan}`)).status).toBe(200);
      expect((await reg.admin('GET', `/admin/plans/${plan}`)).status).toBe(404);
    });

    it.each([
      ['PUT', { overrides: { max_connections: 0 } }, /max_connections must be a whole number from 1 to 10000000/],
      ['PUT', { overrides: { max_message_bytes: 65_537 } }, /max_message_bytes must be a whole number from 1 to 65536/],
      ['PUT', { overrides: { publish_rate_per_s: 1.5 } }, /publish_rate_per_s must be a whole number/],
      ['PUT', { overrides: { bogus: 1 } }, /unknown limit "bogus"; known: max_connections/],
      ['PUT', { overrides: { max_connections: null } }, /max_connections must be a whole number from 1 to 10000000$/],
      ['PUT', { limits: {} }, /unknown field "limits"/],
      ['PUT', [], /the body is/],
      ['PATCH', {}, /nothing to change/],
      ['PATCH', { plan: 'Not A Plan' }, /plan must be a plan name/],
    ])('%s %j is 400 invalid_limits with a problem, changing nothing', async (method, body, problem) => {
      const id = await create();
      const res = await call(method, `/admin/tenants/${id}/limits`, body);
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/json/);
      const answer = (await res.json()) as { errors: string[]; problem: string };
      expect(answer.errors).toEqual(['invalid_limits']);
      expect(answer.problem).toMatch(problem);
      expect(limitsEvents(id)).toEqual([]);
    });

    it('answers the other failures with their codes, never a 500', async () => {
      const id = await create();
      const cases: Array<[Promise<Response>, number, string]> = [
        [call('PUT', `/admin/tenants/${id}/limits`, '{not json'), 400, 'invalid_body'],
        [call('PATCH', `/admin/tenants/${id}/limits`, { plan: 'nope' }), 404, 'plan_not_found'],
        [call('PUT', '/admin/tenants/6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50/limits', {}), 404, 'tenant_not_found'],
        [call('PUT', '/admin/tenants/nope/limits', {}), 400, 'invalid_tenant_id'],
        [call('PUT', '/admin/plans/free', { limits: { max_connections: -1 } }), 400, 'invalid_limits'],
        [call('PUT', '/admin/plans/free', { max_connections: 1 }), 400, 'invalid_limits'],
        [call('PUT', '/admin/plans/BAD!', { limits: {} }), 400, 'invalid_limits'],
        [call('GET', '/admin/plans/none-such'), 404, 'plan_not_found'],
        [call('POST', `/admin/tenants/${id}/limits`, {}), 405, 'method_not_allowed'],
        [reg.admin('GET', `/admin/tenants/${id}/limits`, { headers: { authorization: 'Bearer wrong' } }), 401, 'invalid_admin_token'],
      ];
      for (const [pending, status, code] of cases) {
        const res = await pending;
        expect([res.status, ((await res.json()) as { errors: string[] }).errors]).toEqual([status, [code]]);
      }
    });
  });
}
