import { useEffect, useState } from 'preact/hooks';
import { answerOf, api, type Answer, type AuditEntry } from '../api/client';
import { AnswerView, Pager, shortId, Table, time } from '../ui';

interface Filter {
  tenant: string;
  actions: string;
  outcome: '' | 'ok' | 'refused' | 'failed';
  since: string;
  until: string;
}

/** A datetime-local value, read as UTC (the log's clock), as RFC 3339. */
function utc(local: string): string | undefined {
  return local ? `${local.length === 16 ? `${local}:00` : local}Z` : undefined;
}

export function AuditPage({ tenant }: { tenant: string }) {
  const empty: Filter = { tenant, actions: '', outcome: '', since: '', until: '' };
  const [draft, setDraft] = useState<Filter>(empty);
  const [filter, setFilter] = useState<Filter>(empty);
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const [page, setPage] = useState<{ entries: AuditEntry[]; next: string | null } | null>(null);
  const [failure, setFailure] = useState<Answer | null>(null);
  const cursor = cursors[cursors.length - 1];

  useEffect(() => {
    let live = true;
    const actions = filter.actions.split(/[\s,]+/).filter(Boolean);
    const since = utc(filter.since);
    const until = utc(filter.until);
    const query = {
      limit: 25,
      ...(cursor && { cursor }),
      ...(filter.tenant && { tenant_id: filter.tenant }),
      ...(actions.length > 0 && { action: actions }),
      ...(filter.outcome && { outcome: filter.outcome }),
      ...(since && { since }),
      ...(until && { until }),
    };
    void answerOf(api.GET('/admin/audit', { params: { query } })).then((a) => {
      if (!live) return;
      if (a.data) {
        setPage({ entries: a.data.entries, next: a.data.next_cursor });
        setFailure(null);
      } else {
        setFailure(a);
        setPage(null);
      }
    });
    return () => {
      live = false;
    };
  }, [filter, cursor]);

  const field = (k: keyof Filter) => ({ value: draft[k], onInput: (e: Event) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value }) });
  return (
    <>
      <h1>Audit log</h1>
      <form
        class="filters"
        aria-label="Filter the audit log"
        onSubmit={(e) => {
          e.preventDefault();
          setFilter({ ...draft, tenant: draft.tenant.trim() });
          setCursors([undefined]);
        }}
      >
        <label>
          Tenant id <input id="audit-tenant" {...field('tenant')} placeholder="any" />
        </label>
        <label>
          Actions <input id="audit-actions" {...field('actions')} placeholder="rotate, disable" />
        </label>
        <label>
          Outcome
          <select id="audit-outcome" value={draft.outcome} onChange={(e) => setDraft({ ...draft, outcome: e.currentTarget.value as Filter['outcome'] })}>
            <option value="">any</option>
            <option value="ok">ok (2xx, 3xx)</option>
            <option value="refused">refused (4xx)</option>
            <option value="failed">failed (5xx)</option>
          </select>
        </label>
        <label>
          Since (UTC) <input id="audit-since" type="datetime-local" step={1} {...field('since')} />
        </label>
        <label>
          Until (UTC) <input id="audit-until" type="datetime-local" step={1} {...field('until')} />
        </label>
        <button type="submit">Apply</button>
      </form>
      {failure && <AnswerView answer={failure} />}
      {page && (
        <>
          <Table label="Audit entries">
            <thead>
              <tr>
                <th>At (UTC)</th>
                <th>Action</th>
                <th>Tenant</th>
                <th class="num">Status</th>
                <th>Error</th>
                <th>Actor</th>
              </tr>
            </thead>
            <tbody id="audit-body">
              {page.entries.length === 0 && (
                <tr>
                  <td colSpan={6}>No entry matches.</td>
                </tr>
              )}
              {page.entries.map((e) => (
                <tr data-action={e.action}>
                  <td class="nowrap">{time(e.at)}</td>
                  <td>
                    <code>{e.action}</code> <span class="sub">{e.method}</span>
                  </td>
                  <td>{e.tenant_id ? <a href={`#/tenants/${e.tenant_id}`}>{shortId(e.tenant_id)}</a> : '–'}</td>
                  <td class={`num ${e.status >= 400 ? 'bad' : ''}`}>{e.status}</td>
                  <td>{e.error ?? ''}</td>
                  <td>
                    <code>{e.actor}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </Table>
          <Pager cursors={cursors} next={page.next} onChange={setCursors} labels={['Newest', 'Older']} />
        </>
      )}
    </>
  );
}
