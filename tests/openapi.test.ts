import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, signWithJose, type CreatedTenant } from './support/host';
import { OpenApiContract } from './support/openapi';
import { REPO_ROOT } from './support/processes';
import { startStack, type Stack } from './support/stack';
import { SignJWT } from 'jose';

const DOC = join(REPO_ROOT, 'docs', 'openapi.yaml');
const NIL_TENANT = '00000000-0000-4000-8000-000000000000';

/**
 * docs/openapi.yaml against the distributed deployment (every service its own
 * process): the document is valid OpenAPI 3.1, and every answer below — errors
 * included — has a documented status, body and headers. Every documented
 * operation is called at least once.
 */
describe('docs/openapi.yaml against the running services', () => {
  let stack: Stack;
  let contract: OpenApiContract;
  let tenant: CreatedTenant;
  let secret: string;
  let token: string;

  beforeAll(async () => {
    contract = await OpenApiContract.load(DOC);
    // Usage flushed every second, so the usage calls answer with buckets.
    stack = await startStack({ realtimeEnv: [{ USAGE_FLUSH_INTERVAL_S: '1' }, { USAGE_FLUSH_INTERVAL_S: '1' }] });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  // The documented servers are npm start's; here each call goes to the stack's gateway or registry.
  const base = (template: string) => (contract.serverOf(template).endsWith(':8082') ? stack.registryUrl : stack.gatewayUrl);
  const call = (method: string, template: string, opts: Parameters<OpenApiContract['call']>[3] = {}) => contract.call(base(template), method, template, opts);
  const admin = () => ({ authorization: `Bearer ${stack.adminToken}` });
  const user = (t = token) => ({ authorization: `Bearer ${t}` });
  const json = { 'content-type': 'application/json' };
  const errors = (a: { body: unknown }) => (a.body as { errors: string[] }).errors;

  it('is a valid OpenAPI 3.1 document', () => {
    expect(contract.doc.openapi).toBe('3.1.0');
    expect(contract.operations().length).toBeGreaterThan(10);
  });

  it('admin API: tenants, their changes, the audit log, and every refusal', async () => {
    expect((await call('POST', '/admin/tenants')).status).toBe(401);
    expect((await call('POST', '/admin/tenants', { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    expect(errors(await call('POST', '/admin/tenants', { headers: { ...admin(), ...json }, body: '{"name":' }))).toEqual(['invalid_body']);
    expect(errors(await call('POST', '/admin/tenants', { headers: { ...admin(), ...json }, body: '{"nmae":"x"}' }))).toEqual(['invalid_tenant_meta']);
    expect((await call('POST', '/admin/tenants', { headers: { ...admin(), ...json }, body: `{"pad":"${'x'.repeat(20_000)}"}` })).status).toBe(413);
    const named = await call('POST', '/admin/tenants', { headers: { ...admin(), ...json }, body: '{"name":"Acme","labels":{"plan":"pro"}}' });
    expect(named.status).toBe(201);
    const namedId = (named.body as { tenant_id: string }).tenant_id;
    const patched = await call('PATCH', '/admin/tenants/{tenant_id}', { headers: { ...admin(), ...json }, params: { tenant_id: namedId }, body: '{"name":null,"labels":{"plan":null,"tier":"gold"}}' });
    expect(patched.body).toMatchObject({ name: null, labels: { tier: 'gold' } });
    expect(errors(await call('PATCH', '/admin/tenants/{tenant_id}', { headers: { ...admin(), ...json }, params: { tenant_id: namedId }, body: '{}' }))).toEqual(['invalid_tenant_meta']);
    expect(errors(await call('PATCH', '/admin/tenants/{tenant_id}', { headers: { ...admin(), ...json }, params: { tenant_id: NIL_TENANT }, body: '{"name":"x"}' }))).toEqual(['tenant_not_found']);
    expect((await call('GET', '/admin/tenants', { headers: admin(), query: { label: 'tier=gold', q: 'acm' } })).status).toBe(200);
    // DELETE (#30): refusals first, then the deletion, its repeat, and the id gone.
    expect(errors(await call('DELETE', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: namedId }, query: { keep_usage: 'maybe' } }))).toEqual(['invalid_query']);
    expect(errors(await call('DELETE', '/admin/tenants/{tenant_id}', { headers: { ...admin(), ...json }, params: { tenant_id: namedId }, body: '{"x":1}' }))).toEqual(['invalid_body']);
    expect(errors(await call('DELETE', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: NIL_TENANT } }))).toEqual(['tenant_not_found']);
    expect((await call('DELETE', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: namedId }, query: { keep_usage: 'true' } })).body).toMatchObject({ deleted: true, usage_kept: true });
    expect((await call('DELETE', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: namedId } })).status).toBe(200);
    expect(errors(await call('GET', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: namedId } }))).toEqual(['tenant_not_found']);
    expect(errors(await call('GET', '/admin/tenants', { headers: admin(), query: { label: 'Tier=gold' } }))).toEqual(['invalid_query']);
    const created = await call('POST', '/admin/tenants', { headers: admin() });
    expect(created.status).toBe(201);
    tenant = created.body as CreatedTenant;
    const other = (await call('POST', '/admin/tenants', { headers: { ...admin(), ...json }, body: '{}' })).body as CreatedTenant;

    const page = await call('GET', '/admin/tenants', { headers: admin(), query: { limit: '1' } });
    expect(page.status).toBe(200);
    const next = (page.body as { next_cursor: string }).next_cursor;
    expect((await call('GET', '/admin/tenants', { headers: admin(), query: { limit: '100', cursor: next } })).status).toBe(200);
    const badPages: Array<Record<string, string>> = [{ limit: '0' }, { limit: '101' }, { limit: 'x' }, { cursor: 'not a cursor' }, { cursor: 'WyJ4Il0' }];
    for (const query of badPages) {
      expect(errors(await call('GET', '/admin/tenants', { headers: admin(), query }))).toEqual(['invalid_query']);
    }

    expect((await call('GET', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: tenant.tenant_id } })).status).toBe(200);
    expect(errors(await call('GET', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: 'not-a-uuid' } }))).toEqual(['invalid_tenant_id']);
    expect(errors(await call('GET', '/admin/tenants/{tenant_id}', { headers: admin(), params: { tenant_id: NIL_TENANT } }))).toEqual(['tenant_not_found']);
    expect((await call('GET', '/admin/tenants/{tenant_id}', { params: { tenant_id: tenant.tenant_id } })).status).toBe(401);
    expect((await call('GET', '/admin/tenants')).status).toBe(401);

    // Every change, on the second tenant; refusals on the first route of each kind.
    const changes = ['disable', 'enable', 'jwt_secret/rotate', 'jwt_secret/expire_previous', 'jwt_secret/revoke_all', 'host_sync/rotate', 'host_sync/expire_previous'];
    for (const change of changes) {
      const template = `/admin/tenants/{tenant_id}/${change}`;
      const ok = await call('POST', template, { headers: admin(), params: { tenant_id: other.tenant_id } });
      expect(ok.status, change).toBe(200);
      expect(errors(await call('POST', template, { headers: admin(), params: { tenant_id: NIL_TENANT } }))).toEqual(['tenant_not_found']);
      expect(errors(await call('POST', template, { headers: admin(), params: { tenant_id: 'nope' } }))).toEqual(['invalid_tenant_id']);
      expect((await call('POST', template, { params: { tenant_id: other.tenant_id } })).status).toBe(401);
      expect((await call('POST', template, { headers: { ...admin(), ...json }, params: { tenant_id: other.tenant_id }, body: `"${'x'.repeat(2000)}"` })).status).toBe(413);
    }
    expect(errors(await call('POST', '/admin/tenants/{tenant_id}/disable', { headers: { ...admin(), ...json }, params: { tenant_id: other.tenant_id }, body: '[1]' }))).toEqual(['invalid_body']);
    // The host-sync overlap (#33): keep_previous, and a bad value of it.
    const overlap = { headers: admin(), params: { tenant_id: other.tenant_id } };
    expect((await call('POST', '/admin/tenants/{tenant_id}/host_sync/rotate', { ...overlap, query: { keep_previous: 'true' } })).body).toMatchObject({ has_previous_host_sync: true });
    expect(errors(await call('POST', '/admin/tenants/{tenant_id}/host_sync/rotate', { ...overlap, query: { keep_previous: 'maybe' } }))).toEqual(['invalid_query']);
    expect((await call('POST', '/admin/tenants/{tenant_id}/host_sync/expire_previous', overlap)).body).toMatchObject({ has_previous_host_sync: false });

    // Channel rules (#13), on the second tenant.
    const rules = '/admin/tenants/{tenant_id}/channel_rules';
    const onOther = { headers: admin(), params: { tenant_id: other.tenant_id } };
    expect((await call('GET', rules, onOther)).body).toMatchObject({ tenant_id: other.tenant_id, version: 0 });
    const doc = { default: ['subscribe', 'history'], channels: [{ pattern: 'chat:*', actions: ['subscribe', 'publish', 'history'], presence: true }] };
    const set = await call('PUT', rules, { ...onOther, headers: { ...admin(), ...json }, body: JSON.stringify(doc) });
    expect(set.body).toMatchObject({ version: 1, rules: { default: ['subscribe', 'history'] } });
    const refused = await call('PUT', rules, { ...onOther, headers: { ...admin(), ...json }, body: '{"channels":[{"pattern":"a b","actions":["subscribe"]}]}' });
    expect(refused.body).toMatchObject({ errors: ['invalid_channel_rules'], problem: expect.stringMatching(/channels\[0\]\.pattern/) });
    expect(errors(await call('PUT', rules, { ...onOther, headers: { ...admin(), ...json }, body: 'not json' }))).toEqual(['invalid_body']);
    expect((await call('PUT', rules, { ...onOther, headers: { ...admin(), ...json }, body: `{"pad":"${'x'.repeat(140_000)}"}` })).status).toBe(413);
    expect((await call('DELETE', rules, onOther)).body).toMatchObject({ version: 2 });
    expect(errors(await call('DELETE', rules, { ...onOther, headers: { ...admin(), ...json }, body: '[1]' }))).toEqual(['invalid_body']);
    expect((await call('DELETE', rules, { ...onOther, headers: { ...admin(), ...json }, body: `"${'x'.repeat(2000)}"` })).status).toBe(413);
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const body = method === 'PUT' ? JSON.stringify(doc) : undefined;
      expect(errors(await call(method, rules, { headers: { ...admin(), ...json }, params: { tenant_id: NIL_TENANT }, body }))).toEqual(['tenant_not_found']);
      expect(errors(await call(method, rules, { headers: { ...admin(), ...json }, params: { tenant_id: 'nope' }, body }))).toEqual(['invalid_tenant_id']);
      expect((await call(method, rules, { params: { tenant_id: other.tenant_id }, body })).status).toBe(401);
    }

    // Plans and per-tenant limits (#30), on the second tenant.
    const limits = '/admin/tenants/{tenant_id}/limits';
    const plan = '/admin/plans/{name}';
    const withJson = { headers: { ...admin(), ...json } };
    expect((await call('GET', limits, onOther)).body).toEqual({ tenant_id: other.tenant_id, plan: null, overrides: {}, limits: {}, limits_version: 0 });
    expect((await call('PUT', plan, { ...withJson, params: { name: 'openapi-pro' }, body: '{"limits":{"max_connections":50}}' })).status).toBe(201);
    expect((await call('PUT', plan, { ...withJson, params: { name: 'openapi-pro' }, body: '{"limits":{"max_connections":60}}' })).body).toMatchObject({ version: 2 });
    expect((await call('GET', plan, { headers: admin(), params: { name: 'openapi-pro' } })).body).toMatchObject({ name: 'openapi-pro', tenants: 0 });
    expect((await call('GET', '/admin/plans', { headers: admin() })).body).toMatchObject({ plans: [{ name: 'openapi-pro' }] });
    const put = await call('PUT', limits, { ...withJson, params: { tenant_id: other.tenant_id }, body: '{"plan":"openapi-pro","overrides":{"max_message_bytes":1000}}' });
    expect(put.body).toMatchObject({ plan: 'openapi-pro', limits: { max_connections: 60, max_message_bytes: 1000 }, limits_version: 1 });
    expect((await call('PATCH', limits, { ...withJson, params: { tenant_id: other.tenant_id }, body: '{"overrides":{"max_message_bytes":null}}' })).body).toMatchObject({ overrides: {} });
    expect(await call('PUT', limits, { ...withJson, params: { tenant_id: other.tenant_id }, body: '{"overrides":{"max_message_bytes":70000}}' })).toMatchObject({ status: 400, body: { errors: ['invalid_limits'], problem: expect.stringMatching(/65536/) } });
    expect(errors(await call('PATCH', limits, { ...withJson, params: { tenant_id: other.tenant_id }, body: '{"plan":"none-such"}' }))).toEqual(['plan_not_found']);
    expect(errors(await call('PATCH', limits, { ...withJson, params: { tenant_id: NIL_TENANT }, body: '{"plan":null}' }))).toEqual(['tenant_not_found']);
    expect(errors(await call('GET', limits, { headers: admin(), params: { tenant_id: 'nope' } }))).toEqual(['invalid_tenant_id']);
    expect(errors(await call('PUT', limits, { ...withJson, params: { tenant_id: other.tenant_id }, body: 'not json' }))).toEqual(['invalid_body']);
    expect(await call('DELETE', plan, { headers: admin(), params: { name: 'openapi-pro' } })).toMatchObject({ status: 409, body: { errors: ['plan_in_use'], tenants: 1 } });
    expect((await call('PATCH', limits, { ...withJson, params: { tenant_id: other.tenant_id }, body: '{"plan":null}' })).body).toMatchObject({ plan: null });
    expect((await call('DELETE', plan, { headers: admin(), params: { name: 'openapi-pro' } })).body).toEqual({ name: 'openapi-pro', deleted: true });
    expect(errors(await call('GET', plan, { headers: admin(), params: { name: 'openapi-pro' } }))).toEqual(['plan_not_found']);
    expect(errors(await call('GET', plan, { headers: admin(), params: { name: 'Bad Name' } }))).toEqual(['invalid_limits']);

    // An operator's hand on one user (#13), on the second tenant.
    for (const action of ['revoke_tokens', 'disconnect']) {
      const template = `/admin/tenants/{tenant_id}/users/{user_id}/${action}`;
      const someone = randomUUID();
      const done = await call('POST', template, { headers: admin(), params: { tenant_id: other.tenant_id, user_id: someone } });
      expect(done.body).toMatchObject({ tenant_id: other.tenant_id, user_id: someone });
      expect(errors(await call('POST', template, { headers: admin(), params: { tenant_id: 'nope', user_id: someone } }))).toEqual(['invalid_tenant_id']);
      expect(errors(await call('POST', template, { headers: admin(), params: { tenant_id: NIL_TENANT, user_id: someone } }))).toEqual(['tenant_not_found']);
      expect(errors(await call('POST', template, { headers: admin(), params: { tenant_id: other.tenant_id, user_id: 'nope' } }))).toEqual(['invalid_body']);
      expect(errors(await call('POST', template, { headers: { ...admin(), ...json }, params: { tenant_id: other.tenant_id, user_id: someone }, body: '[1]' }))).toEqual(['invalid_body']);
      expect((await call('POST', template, { headers: { ...admin(), ...json }, params: { tenant_id: other.tenant_id, user_id: someone }, body: `"${'x'.repeat(2000)}"` })).status).toBe(413);
      expect((await call('POST', template, { params: { tenant_id: other.tenant_id, user_id: someone } })).status).toBe(401);
    }

    const audit = await call('GET', '/admin/audit', { headers: admin(), query: { tenant_id: other.tenant_id, limit: '100' } });
    expect(audit.status).toBe(200);
    expect((audit.body as { entries: Array<{ action: string }> }).entries.map((e) => e.action)).toContain('revoke_all');
    expect((await call('GET', '/admin/audit', { headers: admin() })).status).toBe(200);
    expect(errors(await call('GET', '/admin/audit', { headers: admin(), query: { tenant_id: 'NOT-A-UUID' } }))).toEqual(['invalid_tenant_id']);
    expect(errors(await call('GET', '/admin/audit', { headers: admin(), query: { limit: '1000' } }))).toEqual(['invalid_query']);
    expect(errors(await call('GET', '/admin/audit', { headers: admin(), query: { cursor: '!' } }))).toEqual(['invalid_query']);
    expect((await call('GET', '/admin/audit')).status).toBe(401);
    expect((await call('GET', '/admin/audit', { headers: admin(), query: { action: 'revoke_all', outcome: 'ok', since: '2020-01-01T00:00:00Z' } })).status).toBe(200);
    expect(errors(await call('GET', '/admin/audit', { headers: admin(), query: { outcome: 'maybe' } }))).toEqual(['invalid_query']);
    expect((await call('GET', '/admin/tenants', { headers: admin(), query: { state: 'disabled' } })).status).toBe(200);

    // The console's Live page: the registry's REALTIME_URL (one instance here) and every feed consumer.
    const live = await call('GET', '/admin/live', { headers: admin() });
    expect(live.status).toBe(200);
    expect((live.body as { instances: unknown[] }).instances).toHaveLength(1);
    expect((await call('GET', '/admin/live')).status).toBe(401);

    // The keyring (#33): the stack runs SECRETS_KEY alone, so k0 seals everything.
    const keyring = await call('GET', '/admin/secrets-key', { headers: admin() });
    expect(keyring.body).toMatchObject({ active_key_id: 'k0', state: 'done', configured_key_ids: ['k0'], removable_key_ids: [] });
    expect((await call('GET', '/admin/secrets-key')).status).toBe(401);

    // Outside the operations: another method, an unknown path.
    const wrongMethod = await contract.callExpecting(stack.registryUrl, 'DELETE', '/admin/tenants', 'MethodNotAllowed', { headers: admin() });
    expect(wrongMethod.headers.get('allow')).toBe('GET, POST');
    await contract.callExpecting(stack.registryUrl, 'GET', '/admin/nothing-here', 'NotFound', { headers: admin() });
  });

  it('host API: the secret fetch, its byte-identical refusal, the body limit and the rate limit', async () => {
    const fetchPath = '/api/host/tenants/{tenant_id}/jwt_secret/fetch';
    const ok = await call('POST', fetchPath, { params: { tenant_id: tenant.tenant_id }, headers: { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret) } });
    expect(ok.status).toBe(200);
    secret = (ok.body as { jwt_secret_primary: string }).jwt_secret_primary;
    const refusals = [
      await call('POST', fetchPath, { params: { tenant_id: tenant.tenant_id }, headers: { authorization: basic(tenant.host_sync_client_id, 'wrong') } }),
      await call('POST', fetchPath, { params: { tenant_id: tenant.tenant_id } }),
      await call('POST', fetchPath, { params: { tenant_id: '%ZZ' }, headers: { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret) } }),
    ];
    for (const r of refusals) expect([r.status, r.text]).toEqual([401, refusals[0]!.text]);
    expect((await call('POST', fetchPath, { params: { tenant_id: tenant.tenant_id }, headers: { ...json, authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret) }, body: 'x'.repeat(5000) })).status).toBe(413);

    // HOST_FETCH_RATE_LIMIT (60) failures a minute for one tenant id from one address, then 429.
    const guessed = randomUUID();
    let last = 0;
    for (let i = 0; i < 61 && last !== 429; i++) last = (await call('POST', fetchPath, { params: { tenant_id: guessed }, headers: { authorization: basic('guess', 'guess') } })).status;
    expect(last).toBe(429);

    const wrongMethod = await contract.callExpecting(stack.gatewayUrl, 'GET', `/api/host/tenants/${tenant.tenant_id}/jwt_secret/fetch`, 'MethodNotAllowed');
    expect(wrongMethod.headers.get('allow')).toBe('POST');
  });

  it('host server API: server publish, presence, disconnect and revoke_tokens, and their refusals', async () => {
    const host = { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret) };
    const wrong = { authorization: basic(tenant.host_sync_client_id, 'wrong') };
    const t = { tenant_id: tenant.tenant_id };
    const publish = '/api/host/tenants/{tenant_id}/messages';
    const sent = await call('POST', publish, { params: t, headers: { ...host, ...json }, body: '{"channels":["general","news"],"data":{"text":"from the server"},"idempotency_key":"srv-1"}' });
    expect((sent.body as { messages: Array<{ channel: string; from: string }> }).messages.map((m) => [m.channel, m.from])).toEqual([['general', 'server'], ['news', 'server']]);
    for (const [body, code] of [
      ['{"channels":[],"data":1}', 'invalid_body'],
      ['{"channels":["general"],"data":1,"extra":1}', 'invalid_body'],
      ['{"channels":["general"]}', 'invalid_body'],
      ['{"channels":["with space"],"data":1}', 'invalid_channel'],
      ['not json', 'invalid_body'],
    ] as const) {
      const refused = await call('POST', publish, { params: t, headers: { ...host, ...json }, body });
      expect(refused.body).toMatchObject({ errors: [code], problem: expect.any(String) });
    }
    expect((await call('POST', publish, { params: t, headers: { ...host, ...json }, body: `{"channels":["general"],"data":"${'x'.repeat(65_537)}"}` })).status).toBe(413);
    expect((await call('POST', publish, { params: t, headers: { ...wrong, ...json }, body: '{"channels":["general"],"data":1}' })).status).toBe(401);

    const presence = '/api/host/tenants/{tenant_id}/channels/{channel}/presence';
    expect((await call('GET', presence, { params: { ...t, channel: 'presence:lobby' }, headers: host })).body).toEqual({ channel: 'presence:lobby', members: [] });
    expect(errors(await call('GET', presence, { params: { ...t, channel: 'with%20space' }, headers: host }))).toEqual(['invalid_channel']);
    expect((await call('GET', presence, { params: { ...t, channel: 'lobby' }, headers: wrong })).status).toBe(401);

    for (const action of ['disconnect', 'revoke_tokens']) {
      const template = `/api/host/tenants/{tenant_id}/users/{user_id}/${action}`;
      const someone = randomUUID().toUpperCase();
      const done = await call('POST', template, { params: { ...t, user_id: someone }, headers: host });
      expect(done.body).toMatchObject({ user_id: someone.toLowerCase() });
      expect(errors(await call('POST', template, { params: { ...t, user_id: 'nope' }, headers: host }))).toEqual(['invalid_body']);
      expect(errors(await call('POST', template, { params: { ...t, user_id: someone }, headers: { ...host, ...json }, body: '[1]' }))).toEqual(['invalid_body']);
      expect((await call('POST', template, { params: { ...t, user_id: someone }, headers: { ...host, ...json }, body: `"${'x'.repeat(2000)}"` })).status).toBe(413);
      expect((await call('POST', template, { params: { ...t, user_id: someone }, headers: wrong })).status).toBe(401);
    }
    const revoke = '/api/host/tenants/{tenant_id}/users/{user_id}/revoke_tokens';
    const refusedRevoke = await call('POST', revoke, { params: { ...t, user_id: randomUUID() }, headers: { ...host, ...json }, body: '{"issued_before":-1}' });
    expect(refusedRevoke.body).toMatchObject({ errors: ['invalid_body'], problem: expect.stringMatching(/from 0 to \d+/) });

    // The failure limit is shared with the secret fetch: per address and tenant id as written.
    const guessed = randomUUID();
    let last = 0;
    for (let i = 0; i < 61 && last !== 429; i++) last = (await call('GET', presence, { params: { tenant_id: guessed, channel: 'lobby' }, headers: wrong })).status;
    expect(last).toBe(429);
    await contract.callExpecting(stack.gatewayUrl, 'GET', `/api/host/tenants/${tenant.tenant_id}/messages`, 'MethodNotAllowed', { headers: host });
  });

  it('callbacks (#32): admin and host server API, set, show, rotate, expire, remove, and their refusals', async () => {
    const host = { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret) };
    const t = { tenant_id: tenant.tenant_id };
    const adminPath = '/admin/tenants/{tenant_id}/callbacks';
    const hostPath = '/api/host/tenants/{tenant_id}/callbacks';
    // Nothing to rotate yet: not_found with a problem.
    expect((await call('POST', `${adminPath}/secret/rotate`, { params: t, headers: admin() })).status).toBe(404);
    expect((await call('POST', `${hostPath}/secret/expire_previous`, { params: t, headers: host })).status).toBe(404);
    const set = await call('PUT', adminPath, { params: t, headers: { ...admin(), ...json }, body: '{"url":"https://host.example/relay","subscribe":["room:*"]}' });
    expect(set.body).toMatchObject({ version: 1, callbacks: { timeout_ms: 1000, publish: [] }, signing_secret: expect.stringMatching(/^whsec_/) });
    expect(errors(await call('PUT', adminPath, { params: t, headers: { ...admin(), ...json }, body: '{"url":"http://host.example/relay","subscribe":["room:*"]}' }))).toEqual(['invalid_callbacks']);
    expect(errors(await call('PUT', hostPath, { params: t, headers: { ...host, ...json }, body: '{"url":"https://host.example/relay"}' }))).toEqual(['invalid_callbacks']);
    expect((await call('GET', adminPath, { params: t, headers: admin() })).body).not.toHaveProperty('signing_secret');
    expect((await call('PUT', hostPath, { params: t, headers: { ...host, ...json }, body: '{"url":"https://host.example/relay","publish":["room:*"],"timeout_ms":500}' })).body).toMatchObject({ version: 2, callbacks: { publish: ['room:*'], subscribe: [] } });
    expect((await call('GET', hostPath, { params: t, headers: host })).status).toBe(200);
    expect((await call('POST', `${adminPath}/secret/rotate`, { params: t, headers: admin() })).body).toMatchObject({ has_previous_secret: true, signing_secret: expect.any(String) });
    expect((await call('POST', `${hostPath}/secret/rotate`, { params: t, headers: host })).body).toMatchObject({ has_previous_secret: true });
    expect((await call('POST', `${adminPath}/secret/expire_previous`, { params: t, headers: admin() })).body).toMatchObject({ has_previous_secret: false });
    expect((await call('POST', `${hostPath}/secret/expire_previous`, { params: t, headers: host })).status).toBe(200);
    expect((await call('DELETE', hostPath, { params: t, headers: host })).body).toMatchObject({ callbacks: null });
    expect((await call('DELETE', adminPath, { params: t, headers: admin() })).body).toMatchObject({ callbacks: null, version: 7 });
    expect(errors(await call('GET', adminPath, { params: { tenant_id: NIL_TENANT }, headers: admin() }))).toEqual(['tenant_not_found']);
  });

  it('webhooks (#32): every admin and host call, and their refusals', async () => {
    const events = ['member_added', 'channel_occupied'];
    for (const [prefix, headers] of [
      ['/admin/tenants/{tenant_id}', admin()],
      ['/api/host/tenants/{tenant_id}', { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret) }],
    ] as const) {
      const params = { tenant_id: tenant.tenant_id };
      const created = await call('POST', `${prefix}/webhooks`, { params, headers: { ...headers, ...json }, body: JSON.stringify({ url: 'https://example.com/hook', events }) });
      expect(created.status).toBe(201);
      const id = (created.body as { endpoint_id: string }).endpoint_id;
      expect(errors(await call('POST', `${prefix}/webhooks`, { params, headers: { ...headers, ...json }, body: JSON.stringify({ url: 'http://example.com/hook', events }) }))).toEqual(['invalid_webhook']);
      expect((await call('GET', `${prefix}/webhooks`, { params, headers })).status).toBe(200);
      const one = { ...params, endpoint_id: id };
      expect((await call('GET', `${prefix}/webhooks/{endpoint_id}`, { params: one, headers })).status).toBe(200);
      expect(errors(await call('GET', `${prefix}/webhooks/{endpoint_id}`, { params: { ...params, endpoint_id: '00000000-0000-4000-8000-000000000000' }, headers }))).toEqual(['webhook_not_found']);
      expect((await call('POST', `${prefix}/webhooks/{endpoint_id}/disable`, { params: one, headers })).status).toBe(200);
      expect((await call('POST', `${prefix}/webhooks/{endpoint_id}/enable`, { params: one, headers })).status).toBe(200);
      expect((await call('POST', `${prefix}/webhooks/{endpoint_id}/secret/rotate`, { params: one, headers: { ...headers, ...json }, body: '{"overlap_s": 60}' })).status).toBe(200);
      expect((await call('GET', `${prefix}/webhooks/{endpoint_id}/deliveries`, { params: one, headers })).status).toBe(200);
      expect((await call('DELETE', `${prefix}/webhooks/{endpoint_id}`, { params: one, headers })).status).toBe(200);
    }
  });

  it('tenant REST API: me, publish, history, and every refusal a client can cause', async () => {
    const userId = randomUUID();
    token = await signWithJose(secret, tenant.tenant_id, userId);
    const me = await call('GET', '/api/v1/me', { headers: user() });
    expect(me.body).toMatchObject({ tenant_id: tenant.tenant_id, user_id: userId });
    expect((await call('GET', '/api/v1/me')).status).toBe(401);
    // More than MAX_REQUEST_HEADERS (100) header fields.
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`x-extra-${i}`, '1']));
    expect(errors(await call('GET', '/api/v1/me', { headers: { ...user(), ...many } }))).toEqual(['headers_too_large']);
    // The checker itself: a 200 checked against the 401's documentation is refused.
    await expect(contract.callExpecting(stack.gatewayUrl, 'GET', '/api/v1/me', 'InvalidToken', { headers: user() })).rejects.toThrow(/missing|does not match/);
    expect((await call('GET', '/api/v1/me', { headers: user('not.a.token') })).status).toBe(401);

    const messages = '/api/v1/channels/{channel}/messages';
    const general = { channel: 'general' };
    const published = await call('POST', messages, { params: general, headers: { ...user(), ...json, 'idempotency-key': 'k-1' }, body: '{"data":{"text":"hi"}}' });
    expect(published.status).toBe(201);
    const again = await call('POST', messages, { params: general, headers: { ...user(), ...json, 'idempotency-key': 'k-1' }, body: '{"data":{"text":"hi"}}' });
    expect((again.body as { id: string }).id).toBe((published.body as { id: string }).id);
    for (const [params, headers, body, code] of [
      [{ channel: 'x'.repeat(129) }, {}, '{"data":1}', 'invalid_channel'],
      [{ channel: 'with%20space' }, {}, '{"data":1}', 'invalid_channel'],
      [general, {}, 'not json', 'invalid_body'],
      [general, {}, '{"text":"no data member"}', 'invalid_body'],
      [general, {}, `{"data":${'['.repeat(65)}${']'.repeat(65)}}`, 'invalid_body'],
      [general, { 'idempotency-key': 'has space' }, '{"data":1}', 'invalid_body'],
    ] as const) {
      expect(errors(await call('POST', messages, { params, headers: { ...user(), ...json, ...headers }, body }))).toEqual([code]);
    }
    // Over 64 KiB of data but within the gateway's coarse limit: realtime's exact rule answers.
    expect(errors(await call('POST', messages, { params: general, headers: { ...user(), ...json }, body: `{"data":"${'x'.repeat(65_537)}"}` }))).toEqual(['payload_too_large']);
    expect((await call('POST', messages, { params: general, headers: json, body: '{"data":1}' })).status).toBe(401);

    const latest = await call('GET', messages, { params: general, headers: user() });
    expect((latest.body as { messages: Array<{ id: string }> }).messages.map((m) => m.id)).toContain((published.body as { id: string }).id);
    const recovered = await call('GET', messages, { params: general, headers: user(), query: { after: '0-0', limit: '100' } });
    expect(recovered.body).toMatchObject({ recovered: true });
    const epoch = (recovered.body as { epoch: string }).epoch;
    const lost = await call('GET', messages, { params: general, headers: user(), query: { after: '0-0', epoch: `${epoch}x` } });
    // An epoch that is not the current one: never recovered (too_old here, since 0-0 is older than any TTL).
    expect(lost.body).toMatchObject({ recovered: false });
    const badQueries: Array<Record<string, string>> = [{ limit: '0' }, { limit: '101' }, { after: 'abc' }, { after: '0-0', epoch: 'not/ok' }];
    for (const query of badQueries) {
      expect(errors(await call('GET', messages, { params: general, headers: user(), query }))).toEqual(['invalid_query']);
    }
    expect(errors(await call('GET', messages, { params: { channel: 'x'.repeat(129) }, headers: user() }))).toEqual(['invalid_channel']);
    expect((await call('GET', messages, { params: general })).status).toBe(401);

    // A token whose cap allows only history on `lobby`.
    const capped = await new SignJWT({ tenant_id: tenant.tenant_id, user_id: userId, cap: { lobby: ['history'] } })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: tenant.tenant_id })
      .setIssuer('service-relay')
      .setAudience('service-relay')
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(secret));
    expect(errors(await call('POST', messages, { params: { channel: 'lobby' }, headers: { ...user(capped), ...json }, body: '{"data":1}' }))).toEqual(['forbidden_channel']);
    expect(errors(await call('GET', messages, { params: general, headers: user(capped) }))).toEqual(['forbidden_channel']);
    expect(errors(await call('GET', messages, { params: { channel: `user:${randomUUID()}` }, headers: user() }))).toEqual(['forbidden_channel']);

    const presence = '/api/v1/channels/{channel}/presence';
    expect((await call('GET', presence, { params: { channel: 'presence:lobby' }, headers: user() })).body).toEqual({ channel: 'presence:lobby', members: [] });
    expect(errors(await call('GET', presence, { params: general, headers: user() }))).toEqual(['presence_not_enabled']);
    expect(errors(await call('GET', presence, { params: { channel: 'x'.repeat(129) }, headers: user() }))).toEqual(['invalid_channel']);
    expect(errors(await call('GET', presence, { params: { channel: 'presence:lobby' }, headers: user(capped) }))).toEqual(['forbidden_channel']);
    expect((await call('GET', presence, { params: { channel: 'presence:lobby' } })).status).toBe(401);

    await contract.callExpecting(stack.gatewayUrl, 'GET', '/api/v1/nothing-here', 'NotFound', { headers: user() });
    await contract.callExpecting(stack.gatewayUrl, 'POST', '/api/v1/me', 'MethodNotAllowed', { headers: user() });
    await contract.callExpecting(stack.gatewayUrl, 'GET', '/nothing-here', 'NotFound');

    // The publishes above, metered (docs/API.md "Usage"): polled, the flush runs on a timer.
    const usage = '/admin/tenants/{tenant_id}/usage';
    let metered: { status: number; body: unknown } | undefined;
    for (let i = 0; i < 100; i++) {
      metered = await call('GET', usage, { headers: admin(), params: { tenant_id: tenant.tenant_id } });
      if ((metered.body as { totals: { published: { rest: number } } }).totals.published.rest > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((metered!.body as { totals: { published: { rest: number } } }).totals.published.rest).toBeGreaterThan(0);
    expect((await call('GET', usage, { headers: admin(), params: { tenant_id: tenant.tenant_id }, query: { granularity: 'day' } })).status).toBe(200);
    expect(errors(await call('GET', usage, { headers: admin(), params: { tenant_id: tenant.tenant_id }, query: { granularity: 'week' } }))).toEqual(['invalid_query']);
    expect(errors(await call('GET', usage, { headers: admin(), params: { tenant_id: 'nope' } }))).toEqual(['invalid_tenant_id']);
    expect(errors(await call('GET', usage, { headers: admin(), params: { tenant_id: NIL_TENANT } }))).toEqual(['tenant_not_found']);
    expect((await call('GET', usage, { params: { tenant_id: tenant.tenant_id } })).status).toBe(401);
    const all = await call('GET', '/admin/usage', { headers: admin(), query: { sort: 'deliveries', limit: '1' } });
    expect((all.body as { tenants: unknown[] }).tenants).toHaveLength(1);
    expect(errors(await call('GET', '/admin/usage', { headers: admin(), query: { sort: 'name' } }))).toEqual(['invalid_query']);
    expect(errors(await call('GET', '/admin/usage', { headers: admin(), query: { cursor: '!' } }))).toEqual(['invalid_query']);
    expect((await call('GET', '/admin/usage')).status).toBe(401);
  });

  it('answers the documented 502 with realtime down and 503 with the verifier down', async () => {
    for (const name of ['realtime1', 'realtime2']) await stack.processes[name]!.stop();
    // The token is in the gateway's verification cache: only realtime is missing.
    expect(errors(await call('GET', '/api/v1/me', { headers: user() }))).toEqual(['upstream_unavailable']);
    expect(errors(await call('POST', '/api/v1/channels/{channel}/messages', { params: { channel: 'general' }, headers: { ...user(), ...json }, body: '{"data":1}' }))).toEqual(['upstream_unavailable']);
    expect(errors(await call('GET', '/api/v1/channels/{channel}/messages', { params: { channel: 'general' }, headers: user() }))).toEqual(['upstream_unavailable']);
    expect(errors(await call('GET', '/api/v1/channels/{channel}/presence', { params: { channel: 'presence:lobby' }, headers: user() }))).toEqual(['upstream_unavailable']);
    // The registry cannot reach realtime for a server publish: unavailable, nothing published.
    const host = { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret) };
    expect(errors(await call('POST', '/api/host/tenants/{tenant_id}/messages', { params: { tenant_id: tenant.tenant_id }, headers: { ...host, ...json }, body: '{"channels":["general"],"data":1}' }))).toEqual(['unavailable']);
    for (const name of ['verifier1', 'verifier2']) await stack.processes[name]!.stop();
    const fresh = await signWithJose(secret, tenant.tenant_id, randomUUID());
    expect(errors(await call('GET', '/api/v1/me', { headers: user(fresh) }))).toEqual(['auth_unavailable']);
    expect(errors(await call('GET', '/api/v1/channels/{channel}/messages', { params: { channel: 'general' }, headers: user(fresh) }))).toEqual(['auth_unavailable']);
  });

  it('every documented operation was called', () => {
    const missed = contract.operations().filter((op) => !contract.exercised.has(op));
    expect(missed).toEqual([]);
    // Statuses no test can provoke here (500, 504, a PostgreSQL outage, change_not_propagated) are listed, not required.
    console.info(`openapi: documented statuses not exercised: ${contract.unexercisedStatuses().join('; ')}`);
  });
});
