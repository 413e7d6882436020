import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';
const JSON_HEADERS = { 'content-type': 'application/json' };

interface View {
  tenant_id: string;
  name: string | null;
  labels: Record<string, string>;
  updated_at: string;
  disabled: boolean;
}

/**
 * A tenant's name and labels (#30 item 4) on every database:
 * admin-tenant-meta.test.ts (PGlite), admin-tenant-meta.int.test.ts (PostgreSQL).
 */
export function tenantMetaApiContract(driver: string, env: () => Promise<{ env: Record<string, string>; destroy(): Promise<void> }>): void {
  describe(`tenant name and labels on ${driver}`, () => {
    let reg: TestRegistry;
    let destroy: () => Promise<void> = async () => {};
    // A label no other test's tenants carry, so list filters see this run's tenants only.
    const runLabel = `r${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;

    const run = runLabel;
    const create = async (body?: unknown): Promise<View> => {
      const res = await reg.admin('POST', '/admin/tenants', body === undefined ? undefined : { headers: JSON_HEADERS, body: JSON.stringify(body) });
      const text = await res.text();
      expect(res.status, text).toBe(201);
      return JSON.parse(text) as View;
    };
    const patch = (id: string, body: unknown) => reg.admin('PATCH', `/admin/tenants/${id}`, { headers: JSON_HEADERS, body: JSON.stringify(body) });
    const list = async (query: string): Promise<{ tenants: View[]; next_cursor: string | null }> => {
      const res = await reg.admin('GET', `/admin/tenants?${query}`);
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as { tenants: View[]; next_cursor: string | null };
    };
    const problemOf = async (res: Response) => {
      expect(res.status).toBe(400);
      const body = (await res.json()) as { errors: string[]; problem: string };
      expect(body.errors).toEqual(['invalid_tenant_meta']);
      return body.problem;
    };

    beforeAll(async () => {
      const db = await env();
      destroy = db.destroy;
      reg = await startTestRegistry({ env: db.env, logLevel: 'warn' });
    });
    afterAll(async () => {
      await reg?.stop();
      await destroy();
    });

    it('creates a tenant with a name and labels (or neither: null and {}), and shows them in every view', async () => {
      const plain = await create();
      expect(plain).toMatchObject({ name: null, labels: {} });
      const named = await create({ name: 'Acme Corp — EU', labels: { team: 'growth', plan: 'pro', run } });
      expect(named).toMatchObject({ name: 'Acme Corp — EU', labels: { plan: 'pro', run, team: 'growth' } });
      expect(Object.keys(named.labels), 'labels in key order').toEqual(['plan', 'run', 'team']);
      expect(await (await reg.admin('GET', `/admin/tenants/${named.tenant_id}`)).json()).toMatchObject({ name: 'Acme Corp — EU', labels: { plan: 'pro', team: 'growth' } });
    });

    it('PATCH sets the name, merges labels (null removes one), clears the name with null; no tenant feed change, nothing else changes', async () => {
      const t = await create({ name: 'Before', labels: { a: '1', b: '2', run } });
      const events = reg.events.length;
      const renamed = await patch(t.tenant_id, { name: 'After', labels: { b: null, c: '3' } });
      expect(renamed.status).toBe(200);
      const view = (await renamed.json()) as View;
      expect(view).toMatchObject({ tenant_id: t.tenant_id, name: 'After', labels: { a: '1', c: '3', run }, disabled: false });
      expect(view.labels).not.toHaveProperty('b');
      expect(Date.parse(view.updated_at)).toBeGreaterThanOrEqual(Date.parse(t.updated_at));
      const cleared = (await (await patch(t.tenant_id, { name: null })).json()) as View;
      expect(cleared).toMatchObject({ name: null, labels: { a: '1', c: '3', run } });
      expect(reg.events.length, 'name and labels are not token-relevant: no feed change').toBe(events);
      // The audit log records the call as "update".
      const audit = (await (await reg.admin('GET', `/admin/audit?tenant_id=${t.tenant_id}`)).json()) as { entries: Array<{ action: string; status: number }> };
      expect(audit.entries.filter((e) => e.action === 'update').map((e) => e.status)).toEqual([200, 200]);
    });

    it('lists by label (every selector must match), searches names case-insensitively as a literal substring, and pages filtered lists', async () => {
      // This test's own tenants only (the others of this run carry `run` too).
      const run = `${runLabel}l`;
      const made = [
        await create({ name: 'Blue Whale', labels: { run, plan: 'pro', region: 'eu' } }),
        await create({ name: 'blue jay', labels: { run, plan: 'free', region: 'eu' } }),
        await create({ name: 'Red 100% Fox_', labels: { run, plan: 'pro', region: 'us' } }),
        await create({ name: 'Green', labels: { run, plan: 'pro', region: 'eu' } }),
      ];
      const ids = (r: { tenants: View[] }) => r.tenants.map((t) => t.tenant_id);
      expect(ids(await list(`label=run%3D${run}&label=plan%3Dpro&limit=100`))).toEqual([made[0]!, made[2]!, made[3]!].map((t) => t.tenant_id));
      expect(ids(await list(`label=run%3D${run}&label=plan%3Dpro&label=region%3Deu&limit=100`))).toEqual([made[0]!, made[3]!].map((t) => t.tenant_id));
      expect(ids(await list(`label=run%3D${run}&q=BLUE&limit=100`))).toEqual([made[0]!, made[1]!].map((t) => t.tenant_id));
      // % and _ are literal, not LIKE wildcards.
      expect(ids(await list(`label=run%3D${run}&q=${encodeURIComponent('100%')}&limit=100`))).toEqual([made[2]!.tenant_id]);
      expect(ids(await list(`label=run%3D${run}&q=${encodeURIComponent('x_')}&limit=100`))).toEqual([made[2]!.tenant_id]);
      expect(ids(await list(`label=run%3D${run}&q=e_&limit=100`))).toEqual([]);
      expect(ids(await list(`label=run%3D${run}&label=plan%3Dnone`))).toEqual([]);
      // state=enabled|disabled (the console's state filter).
      expect((await reg.admin('POST', `/admin/tenants/${made[1]!.tenant_id}/disable`)).status).toBe(200);
      expect(ids(await list(`label=run%3D${run}&state=disabled`))).toEqual([made[1]!.tenant_id]);
      expect(ids(await list(`label=run%3D${run}&state=enabled&q=blue`))).toEqual([made[0]!.tenant_id]);
      expect((await reg.admin('POST', `/admin/tenants/${made[1]!.tenant_id}/enable`)).status).toBe(200);
      // A filtered list pages with the same cursor.
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let page = 0; page < 10; page++) {
        const r = await list(`label=run%3D${run}&label=plan%3Dpro&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        seen.push(...ids(r));
        cursor = r.next_cursor;
        if (!cursor) break;
      }
      expect(seen).toEqual([made[0]!, made[2]!, made[3]!].map((t) => t.tenant_id));
    });

    it.each([
      ['a name that is not a string', { name: 42 }, 'name must be a string or null'],
      ['an empty name', { name: '' }, 'name must be 1 to 200 characters'],
      ['a name over 200 characters', { name: 'n'.repeat(201) }, 'name must be 1 to 200 characters'],
      ['a name with white space around it', { name: ' x' }, 'name must not start or end with white space'],
      ['a name with a control character', { name: 'a\nb' }, 'name must not contain control characters'],
      ['an unknown field', { nmae: 'x' }, 'unknown field "nmae"'],
      ['labels that are not an object', { labels: ['a'] }, 'labels must be a JSON object of strings'],
      ['an upper-case label key', { labels: { Team: 'x' } }, 'label key "Team"'],
      ['a label key over 63 characters', { labels: { ['k'.repeat(64)]: 'x' } }, 'label key'],
      ['a label value with a space', { labels: { team: 'a b' } }, 'label "team" must be 0 to 63'],
      ['a label value that is a number', { labels: { team: 1 } }, 'label "team" must be a string'],
      ['65 labels', { labels: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])) }, 'at most 64 labels'],
    ])('refuses %s with 400 invalid_tenant_meta and a problem, on create and on update, changing nothing', async (_what, body, problem) => {
      expect(await problemOf(await reg.admin('POST', '/admin/tenants', { headers: JSON_HEADERS, body: JSON.stringify(body) }))).toContain(problem);
      const t = await create({ name: 'Kept', labels: { keep: 'yes' } });
      expect(await problemOf(await patch(t.tenant_id, body))).toContain(problem);
      expect(await (await reg.admin('GET', `/admin/tenants/${t.tenant_id}`)).json()).toMatchObject({ name: 'Kept', labels: { keep: 'yes' } });
    });

    it('refuses an empty update, more than 64 labels after a merge, an unknown tenant and bad list filters', async () => {
      const t = await create({ labels: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, 'v'])) });
      expect(await problemOf(await patch(t.tenant_id, {}))).toContain('nothing to change');
      expect(await problemOf(await patch(t.tenant_id, { labels: { one: 'more' } }))).toBe('at most 64 labels');
      expect((await patch(t.tenant_id, { labels: { k0: null, one: 'more' } })).status, 'one out, one in').toBe(200);
      const unknown = await patch(UNKNOWN_ID, { name: 'x' });
      expect(unknown.status).toBe(404);
      expect(await unknown.json()).toEqual({ errors: ['tenant_not_found'] });
      const notJson = await reg.admin('PATCH', `/admin/tenants/${t.tenant_id}`, { headers: JSON_HEADERS, body: '{' });
      expect(notJson.status).toBe(400);
      expect(await notJson.json()).toEqual({ errors: ['invalid_body'] });
      for (const q of ['label=novalue', 'label=Bad%3Dx', `label=a%3D${'v'.repeat(64)}`, 'label=a%3D1&label=a%3D2', `q=${'q'.repeat(201)}`, 'q=', 'state=off']) {
        const res = await reg.admin('GET', `/admin/tenants?${q}`);
        expect(res.status, q).toBe(400);
        expect(((await res.json()) as { errors: string[] }).errors, q).toEqual(['invalid_query']);
      }
    });
  });
}
