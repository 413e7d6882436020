import * as grpc from '@grpc/grpc-js';
import { channelRulesJson, DEFAULT_CHANNEL_RULES } from '@service-relay/channels';
import { internalClient, internalMetadata, REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, type ChannelRulesRequest, type ChannelRulesResponse, type UnaryMethod } from '@service-relay/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';
const DEFAULT_DOC = channelRulesJson(DEFAULT_CHANNEL_RULES);
/** As an operator writes it: unsorted, an action repeated, presence left out. */
const DOC = {
  default: ['subscribe', 'history'],
  channels: [
    { pattern: 'chat:*', actions: ['publish', 'subscribe', 'publish'] },
    { pattern: 'chat:announcements', actions: ['subscribe'], presence: false },
    { pattern: 'presence:*', actions: ['subscribe', 'presence'], presence: true },
  ],
};
/** What the registry stores and answers: the canonical form (most specific first, actions in their fixed order). */
const CANONICAL = {
  default: ['subscribe', 'history'],
  channels: [
    { pattern: 'chat:announcements', actions: ['subscribe'], presence: false },
    { pattern: 'presence:*', actions: ['subscribe', 'presence'], presence: true },
    { pattern: 'chat:*', actions: ['subscribe', 'publish'], presence: false },
  ],
};

type RulesClient = grpc.Client & { ChannelRules: UnaryMethod<ChannelRulesRequest, ChannelRulesResponse> };

/**
 * The channel rules admin API and the ChannelRules RPC, on every database:
 * admin-channel-rules.test.ts (PGlite), admin-channel-rules.int.test.ts (PostgreSQL).
 * `env` adds the database's variables to the test registry's.
 */
export function channelRulesApiContract(driver: string, env: () => Promise<{ env: Record<string, string>; destroy(): Promise<void> }>): void {
  describe(`channel rules admin API on ${driver}`, () => {
    let reg: TestRegistry;
    let destroy: () => Promise<void> = async () => {};
    let rpc: RulesClient;
    const create = async () => {
      const res = await reg.admin('POST', '/admin/tenants');
      expect(res.status).toBe(201);
      return ((await res.json()) as { tenant_id: string }).tenant_id;
    };
    const put = (id: string, body: string) => reg.admin('PUT', `/admin/tenants/${id}/channel_rules`, { headers: { 'content-type': 'application/json' }, body });
    const ask = (tenantId: string, md = internalMetadata(reg.internalToken)) =>
      new Promise<ChannelRulesResponse>((resolve, reject) => rpc.ChannelRules({ tenant_id: tenantId }, md, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res!))));

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

    it('answers the default at version 0 for a tenant whose operator set nothing', async () => {
      const id = await create();
      const res = await reg.admin('GET', `/admin/tenants/${id}/channel_rules`);
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(await res.json()).toEqual({ tenant_id: id, version: 0, rules: DEFAULT_DOC });
    });

    it('sets the canonical document; the 200 comes after every feed consumer applied the channel_rules change', async () => {
      const id = await create();
      const res = await put(id, JSON.stringify(DOC));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ tenant_id: id, version: 1, rules: CANONICAL });
      // The test registry's own consumer applied it before the answer.
      expect(reg.events.filter((e) => e.tenant_id === id && e.kind === 'channel_rules').map((e) => e.detail)).toEqual([{ rules: CANONICAL, rules_version: 1 }]);
      expect(await (await reg.admin('GET', `/admin/tenants/${id}/channel_rules`)).json()).toEqual({ tenant_id: id, version: 1, rules: CANONICAL });
      // The tenant itself (its token state) did not change.
      expect(await (await reg.admin('GET', `/admin/tenants/${id}`)).json()).toMatchObject({ tenant_id: id, disabled: false });
    });

    it('resets to the default with DELETE: the version keeps growing and the feed carries the default document', async () => {
      const id = await create();
      expect((await put(id, JSON.stringify(DOC))).status).toBe(200);
      const res = await reg.admin('DELETE', `/admin/tenants/${id}/channel_rules`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ tenant_id: id, version: 2, rules: DEFAULT_DOC });
      expect(reg.events.filter((e) => e.tenant_id === id && e.kind === 'channel_rules').map((e) => e.detail)).toEqual([
        { rules: CANONICAL, rules_version: 1 },
        { rules: DEFAULT_DOC, rules_version: 2 },
      ]);
      expect((await reg.admin('DELETE', `/admin/tenants/${id}/channel_rules`, { body: '{"x":1}' })).status).toBe(400);
    });

    it.each([
      ['not an object', '[]', /JSON object/],
      ['an unknown member', '{"rules":[]}', /unknown member "rules".*"default" and "channels"/],
      ['an unknown action', '{"channels":[{"pattern":"a","actions":["admin"]}]}', /channels\[0\]\.actions.*subscribe, publish, history, presence/],
      ['a bad default', '{"default":"all"}', /"default" must be an array of actions from: subscribe, publish, history, presence/],
      ['a bare *', '{"channels":[{"pattern":"*","actions":[]}]}', /channels\[0\]\.pattern must be a channel name/],
      ['a * in the middle', '{"channels":[{"pattern":"a*b","actions":[]}]}', /channels\[0\]\.pattern/],
      ['a pattern twice', '{"channels":[{"pattern":"a","actions":[]},{"pattern":"a","actions":["publish"]}]}', /appears twice/],
      ['presence not a boolean', '{"channels":[{"pattern":"a","actions":[],"presence":"yes"}]}', /presence must be true or false/],
      ['too many rules', JSON.stringify({ channels: Array.from({ length: 257 }, (_, i) => ({ pattern: `c${i}`, actions: [] })) }), /at most 256 rules/],
    ])('refuses %s with 400 invalid_channel_rules and a problem naming what is allowed, changing nothing', async (_name, body, problem) => {
      const id = await create();
      const res = await put(id, body);
      expect(res.status).toBe(400);
      const answer = (await res.json()) as { errors: string[]; problem: string };
      expect(Object.keys(answer)).toEqual(['errors', 'problem']);
      expect(answer.errors).toEqual(['invalid_channel_rules']);
      expect(answer.problem).toMatch(problem);
      expect(await (await reg.admin('GET', `/admin/tenants/${id}/channel_rules`)).json()).toMatchObject({ version: 0 });
      expect(reg.events.some((e) => e.tenant_id === id && e.kind === 'channel_rules')).toBe(false);
    });

    it('answers the other failures with the contract codes', async () => {
      const id = await create();
      const cases: Array<[Promise<Response>, number, string]> = [
        [put(id, '{not json'), 400, 'invalid_body'],
        [put(id, ''), 400, 'invalid_body'],
        [put(id, JSON.stringify({ channels: [{ pattern: 'x'.repeat(128), actions: ['subscribe'] }] }).padEnd(200 * 1024, ' ')), 413, 'payload_too_large'],
        [put(UNKNOWN_ID, JSON.stringify(DOC)), 404, 'tenant_not_found'],
        [reg.admin('GET', `/admin/tenants/${UNKNOWN_ID}/channel_rules`), 404, 'tenant_not_found'],
        [reg.admin('DELETE', `/admin/tenants/${UNKNOWN_ID}/channel_rules`), 404, 'tenant_not_found'],
        [reg.admin('GET', `/admin/tenants/${id.toUpperCase()}/channel_rules`), 400, 'invalid_tenant_id'],
        [reg.admin('POST', `/admin/tenants/${id}/channel_rules`), 405, 'method_not_allowed'],
        [reg.admin('GET', `/admin/tenants/${id}/channel_rules`, { headers: { authorization: 'Bearer nope' } }), 401, 'invalid_admin_token'],
      ];
      for (const [pending, status, code] of cases) {
        const res = await pending;
        expect(res.status, code).toBe(status);
        expect(await res.json()).toEqual({ errors: [code] });
        if (status === 405) expect(res.headers.get('allow')).toBe('GET, PUT, DELETE');
      }
    });

    it('records every call in the audit log under its own action', async () => {
      const id = await create();
      await reg.admin('GET', `/admin/tenants/${id}/channel_rules`);
      await put(id, '{"default":[]}');
      await put(id, '{"default":["nope"]}');
      await reg.admin('DELETE', `/admin/tenants/${id}/channel_rules`);
      const page = (await (await reg.admin('GET', `/admin/audit?tenant_id=${id}&limit=4`)).json()) as { entries: Array<{ action: string; method: string; status: number; error: string | null }> };
      expect(page.entries.map((e) => [e.action, e.method, e.status, e.error])).toEqual([
        ['reset_channel_rules', 'DELETE', 200, null],
        ['set_channel_rules', 'PUT', 400, 'invalid_channel_rules'],
        ['set_channel_rules', 'PUT', 200, null],
        ['get_channel_rules', 'GET', 200, null],
      ]);
    });

    it('ChannelRules (gRPC) answers the current rules with their version and feed sequence, only to internal callers', async () => {
      const id = await create();
      expect(await ask(id)).toEqual({ found: true, rules_json: JSON.stringify(DEFAULT_DOC), version: 0, as_of_seq: expect.any(Number) });
      expect((await put(id, JSON.stringify(DOC))).status).toBe(200);
      const seq = Math.max(...reg.events.filter((e) => e.tenant_id === id).map((e) => e.seq));
      const answer = await ask(id);
      expect(answer).toMatchObject({ found: true, version: 1 });
      expect(JSON.parse(answer.rules_json)).toEqual(CANONICAL);
      expect(answer.as_of_seq).toBeGreaterThanOrEqual(seq);
      expect(await ask(UNKNOWN_ID)).toEqual({ found: false, rules_json: '', version: 0, as_of_seq: 0 });
      expect(await ask('nope')).toMatchObject({ found: false });
      await expect(ask(id, internalMetadata('x'.repeat(43)))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      await expect(ask(id, new grpc.Metadata())).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    });

    // Last: the stuck consumer keeps its lease a while after it is closed.
    it('answers 503 change_not_propagated with the committed rules while a consumer holding its lease has not applied them', async () => {
      const id = await create();
      const stuck = await reg.consumer(1500);
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      stuck.subscribe(async (e) => {
        if (e.tenant_id === id && e.kind === 'channel_rules') await released;
      });
      try {
        const res = await put(id, JSON.stringify(DOC));
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('1');
        const body = (await res.json()) as Record<string, unknown>;
        expect(body).toEqual({
          errors: ['change_not_propagated'],
          channel_rules: { tenant_id: id, version: 1, rules: CANONICAL },
          pending_consumers: [expect.objectContaining({ consumer_id: stuck.consumerId, kind: 'test-consumer' })],
        });
        release();
        // Repeating the call re-propagates it (a new version) and is confirmed once the consumer caught up.
        const again = await put(id, JSON.stringify(DOC));
        expect(again.status).toBe(200);
        expect(await again.json()).toMatchObject({ version: 2 });
      } finally {
        release();
        stuck.close();
      }
    });
  });
}
