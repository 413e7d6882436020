import { useEffect, useState } from 'preact/hooks';
import { answerOf, api, type Answer, type Tenant, type TenantWithSecret } from '../api/client';
import { AnswerView, CredentialOnce, Pager, shortId, Table } from '../ui';

const PAGE = 20;

interface Filter {
  q: string;
  label: string;
  state: '' | 'enabled' | 'disabled';
}

/** "k=v, k2=v2" into labels; the API judges each key and value. */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    labels[eq < 0 ? part : part.slice(0, eq)] = eq < 0 ? '' : part.slice(eq + 1);
  }
  return labels;
}

/** Per-tenant extras beside the list: plan, live connections, today's messages (undefined: not known). */
interface Extras {
  plan: Map<string, string | null>;
  connections: Map<string, number>;
  /** Tenants beyond what Live lists (its 100 busiest per instance) are not known to have 0. */
  connectionsComplete: boolean;
  messages: Map<string, number>;
  messagesComplete: boolean;
}

export function TenantsPage() {
  const [filter, setFilter] = useState<Filter>({ q: '', label: '', state: '' });
  const [draft, setDraft] = useState<Filter>(filter);
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const [page, setPage] = useState<{ tenants: Tenant[]; next: string | null } | null>(null);
  const [failure, setFailure] = useState<Answer | null>(null);
  const [extras, setExtras] = useState<Extras | null>(null);
  const [created, setCreated] = useState<TenantWithSecret | null>(null);
  const [createAnswer, setCreateAnswer] = useState<Answer | null>(null);
  const [reload, setReload] = useState(0);
  const cursor = cursors[cursors.length - 1];

  useEffect(() => {
    let live = true;
    (async () => {
      const query = {
        limit: PAGE,
        ...(cursor && { cursor }),
        ...(filter.q && { q: filter.q }),
        ...(filter.label && { label: [filter.label] }),
        ...(filter.state && { state: filter.state }),
      };
      const a = await answerOf(api.GET('/admin/tenants', { params: { query } }));
      if (!live) return;
      if (!a.data) {
        setFailure(a);
        setPage(null);
        return;
      }
      setFailure(null);
      setPage({ tenants: a.data.tenants, next: a.data.next_cursor });
      const ids = a.data.tenants.map((t) => t.tenant_id);
      const today = new Date();
      today.setUTCHours(0, 0, 0, 0);
      const [limits, liveView, usage] = await Promise.all([
        Promise.all(ids.map((tenant_id) => answerOf(api.GET('/admin/tenants/{tenant_id}/limits', { params: { path: { tenant_id } } })))),
        answerOf(api.GET('/admin/live')),
        answerOf(api.GET('/admin/usage', { params: { query: { from: today.toISOString(), granularity: 'day', limit: 100 } } })),
      ]);
      if (!live) return;
      setExtras({
        plan: new Map(ids.map((id, i) => [id, limits[i]!.data?.plan ?? null])),
        connections: new Map(liveView.data?.tenants.map((t) => [t.tenant_id, t.connections])),
        connectionsComplete: !!liveView.data && liveView.data.instances.every((i) => i.error === undefined && (i.tenants ?? 0) < 100),
        messages: new Map(usage.data?.tenants.map((t) => [t.tenant_id, t.totals.published.total])),
        messagesComplete: !!usage.data && usage.data.next_cursor === null,
      });
    })();
    return () => {
      live = false;
    };
  }, [filter, cursor, reload]);

  const apply = (e: Event) => {
    e.preventDefault();
    setFilter({ ...draft, q: draft.q.trim(), label: draft.label.trim() });
    setCursors([undefined]);
  };

  const create = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const name = (form.elements.namedItem('name') as HTMLInputElement).value.trim();
    const labels = parseLabels((form.elements.namedItem('labels') as HTMLInputElement).value);
    const body = { ...(name && { name }), ...(Object.keys(labels).length > 0 && { labels }) };
    const a = await answerOf(api.POST('/admin/tenants', { body }));
    setCreateAnswer(a);
    const tenant = a.data ?? (a.status === 503 ? ((a.body as { tenant?: TenantWithSecret }).tenant ?? null) : null);
    if (tenant?.host_sync_client_secret) {
      setCreated(tenant);
      form.reset();
      setReload((n) => n + 1);
    }
  };

  const known = (m: Map<string, number> | undefined, complete: boolean | undefined, id: string) => {
    const v = m?.get(id);
    return v !== undefined ? String(v) : complete ? '0' : '–';
  };

  return (
    <>
      <h1>Tenants</h1>
      <details class="create" open={created !== null || undefined}>
        <summary>Create a tenant</summary>
        <form onSubmit={create} id="create-tenant">
          <label>
            Name <input name="name" maxLength={200} placeholder="Acme EU" />
          </label>
          <label>
            Labels <input name="labels" placeholder="plan=pro, region=eu" />
          </label>
          <button type="submit">Create</button>
        </form>
        {createAnswer && !createAnswer.ok && <AnswerView answer={createAnswer} />}
        {created && <CredentialOnce clientId={created.host_sync_client_id} secret={created.host_sync_client_secret} onDone={() => setCreated(null)} />}
        {created && (
          <p>
            New tenant: <a href={`#/tenants/${created.tenant_id}`}>{created.name ?? created.tenant_id}</a>
          </p>
        )}
      </details>

      <form class="filters" onSubmit={apply} aria-label="Filter tenants">
        <label>
          Search name <input type="search" id="tenant-search" value={draft.q} onInput={(e) => setDraft({ ...draft, q: e.currentTarget.value })} />
        </label>
        <label>
          Label <input id="tenant-label" placeholder="key=value" value={draft.label} onInput={(e) => setDraft({ ...draft, label: e.currentTarget.value })} />
        </label>
        <label>
          State
          <select id="tenant-state" value={draft.state} onChange={(e) => setDraft({ ...draft, state: e.currentTarget.value as Filter['state'] })}>
            <option value="">any</option>
            <option value="enabled">enabled</option>
            <option value="disabled">disabled</option>
          </select>
        </label>
        <button type="submit">Apply</button>
      </form>

      {failure && <AnswerView answer={failure} />}
      {page && (
        <>
          <Table label="Tenants">
            <thead>
              <tr>
                <th>Name</th>
                <th>Labels</th>
                <th>State</th>
                <th>Plan</th>
                <th class="num">Live connections</th>
                <th class="num">Messages today</th>
              </tr>
            </thead>
            <tbody>
              {page.tenants.length === 0 && (
                <tr>
                  <td colSpan={6}>No tenant matches.</td>
                </tr>
              )}
              {page.tenants.map((t) => (
                <tr key={t.tenant_id} data-tenant={t.tenant_id}>
                  <td>
                    <a href={`#/tenants/${t.tenant_id}`}>{t.name ?? <em>unnamed</em>}</a>
                    <div class="sub">
                      <code>{shortId(t.tenant_id)}</code>
                    </div>
                  </td>
                  <td>
                    {Object.entries(t.labels).map(([k, v]) => (
                      <span class="chip">
                        {k}={v}
                      </span>
                    ))}
                  </td>
                  <td>
                    <span class={`state ${t.disabled ? 'disabled' : 'enabled'}`}>{t.disabled ? 'disabled' : 'enabled'}</span>
                  </td>
                  <td>{extras ? (extras.plan.get(t.tenant_id) ?? 'none') : '…'}</td>
                  <td class="num">{extras ? known(extras.connections, extras.connectionsComplete, t.tenant_id) : '…'}</td>
                  <td class="num">{extras ? known(extras.messages, extras.messagesComplete, t.tenant_id) : '…'}</td>
                </tr>
              ))}
            </tbody>
          </Table>
          <Pager cursors={cursors} next={page.next} onChange={setCursors} labels={['Previous', 'Next']} />
        </>
      )}
    </>
  );
}
