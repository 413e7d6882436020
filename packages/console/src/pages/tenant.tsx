import { useEffect, useState } from 'preact/hooks';
import { answerOf, api, type Answer, type LimitsDocument, type Tenant, type TenantLimitsView, type TenantWithSecret } from '../api/client';
import { AnswerView, ConfirmButton, CredentialOnce, time } from '../ui';

type ActionPath =
  | '/admin/tenants/{tenant_id}/jwt_secret/rotate'
  | '/admin/tenants/{tenant_id}/jwt_secret/expire_previous'
  | '/admin/tenants/{tenant_id}/jwt_secret/revoke_all'
  | '/admin/tenants/{tenant_id}/disable'
  | '/admin/tenants/{tenant_id}/enable'
  | '/admin/tenants/{tenant_id}/host_sync/rotate';

/** Each action and what its confirmation says it does (docs/API.md "Admin API"). */
const ACTIONS: Array<{ id: string; path: ActionPath; label: string; what: string; danger?: boolean; when?: (t: Tenant) => boolean }> = [
  {
    id: 'rotate',
    path: '/admin/tenants/{tenant_id}/jwt_secret/rotate',
    label: 'Rotate signing key',
    what: 'Makes a new primary JWT secret; the current primary becomes the previous. A previous key it replaces is removed: its tokens are refused and its live connections closed (4401) on every instance. The host picks up the new key with its host-sync fetch.',
  },
  {
    id: 'expire-previous',
    path: '/admin/tenants/{tenant_id}/jwt_secret/expire_previous',
    label: 'Expire previous key',
    what: 'Removes the previous JWT secret: tokens signed with it are refused and connections on it are closed (4401) on every instance.',
    when: (t) => t.has_previous_secret,
  },
  {
    id: 'revoke-all',
    path: '/admin/tenants/{tenant_id}/jwt_secret/revoke_all',
    label: 'Revoke all keys',
    danger: true,
    what: 'Replaces every JWT secret and the host-sync credential: every token of the tenant is refused and every live connection closed (4401). The host needs the new host-sync secret (shown once) to fetch its new key.',
  },
  {
    id: 'disable',
    path: '/admin/tenants/{tenant_id}/disable',
    label: 'Disable',
    danger: true,
    what: 'Refuses every token of the tenant and closes its live connections (4401) on every instance, until it is enabled again. Keys are kept.',
    when: (t) => !t.disabled,
  },
  {
    id: 'enable',
    path: '/admin/tenants/{tenant_id}/enable',
    label: 'Enable',
    what: 'Accepts the tenant’s tokens again (signed with its current keys).',
    when: (t) => t.disabled,
  },
  {
    id: 'host-sync',
    path: '/admin/tenants/{tenant_id}/host_sync/rotate',
    label: 'Reset host-sync credential',
    what: 'Makes a new host-sync secret (shown once) and refuses the old one at once: the host cannot fetch keys or call the host API until it has the new one.',
  },
];

const LIMIT_KEYS = [
  'max_connections',
  'publish_rate_per_s',
  'publish_burst',
  'connection_publish_rate_per_s',
  'connection_publish_burst',
  'max_subscriptions',
  'max_presence_members',
  'history_max_messages',
  'history_ttl_s',
  'max_message_bytes',
] as const satisfies ReadonlyArray<keyof LimitsDocument>;

export function TenantPage({ tenantId }: { tenantId: string }) {
  const path = { tenant_id: tenantId };
  const [tenant, setTenant] = useState<Tenant | null>(null);
  const [failure, setFailure] = useState<Answer | null>(null);
  const [last, setLast] = useState<{ answer: Answer; retry: () => void; what: string } | null>(null);
  const [secret, setSecret] = useState<TenantWithSecret | null>(null);
  const [deleted, setDeleted] = useState(false);

  const load = async () => {
    const a = await answerOf(api.GET('/admin/tenants/{tenant_id}', { params: { path } }));
    if (a.data) setTenant(a.data);
    else setFailure(a);
  };
  useEffect(() => {
    void load();
  }, [tenantId]);

  const act = async (p: ActionPath, what: string) => {
    setLast(null);
    const a = await answerOf(api.POST(p, { params: { path } }));
    setLast({ answer: a, retry: () => void act(p, what), what });
    const view = (a.data ?? (a.body as { tenant?: TenantWithSecret } | undefined)?.tenant) as TenantWithSecret | Tenant | undefined;
    if (view && 'tenant_id' in view) {
      setTenant(view);
      if ('host_sync_client_secret' in view && view.host_sync_client_secret) setSecret(view);
    }
  };
  const remove = async () => {
    setLast(null);
    const a = await answerOf(api.DELETE('/admin/tenants/{tenant_id}', { params: { path, query: {} } }));
    setLast({ answer: a, retry: () => void remove(), what: 'Delete tenant' });
    if (a.ok) setDeleted(true);
  };

  if (failure) return <AnswerView answer={failure} />;
  if (!tenant) return <p>Loading…</p>;
  return (
    <>
      <p class="crumbs">
        <a href="#/tenants">Tenants</a> /
      </p>
      <h1>{tenant.name ?? 'Unnamed tenant'}</h1>
      <dl class="facts">
        <dt>Tenant id</dt>
        <dd>
          <code id="tenant-id">{tenant.tenant_id}</code>
        </dd>
        <dt>State</dt>
        <dd>
          <span id="tenant-state-badge" class={`state ${deleted ? 'disabled' : tenant.disabled ? 'disabled' : 'enabled'}`}>
            {deleted ? 'deleted' : tenant.disabled ? 'disabled' : 'enabled'}
          </span>
        </dd>
        <dt>Signing keys</dt>
        <dd id="tenant-keys">{tenant.has_previous_secret ? 'primary + previous (both accepted)' : 'primary only'}</dd>
        <dt>Host-sync client id</dt>
        <dd>
          <code>{tenant.host_sync_client_id}</code>
        </dd>
        <dt>Labels</dt>
        <dd>
          {Object.entries(tenant.labels).map(([k, v]) => (
            <span class="chip">
              {k}={v}
            </span>
          ))}
          {Object.keys(tenant.labels).length === 0 && 'none'}
        </dd>
        <dt>Created / updated</dt>
        <dd>
          {time(tenant.created_at)} / {time(tenant.updated_at)}
        </dd>
        <dt>More</dt>
        <dd>
          <a href={`#/usage?tenant=${tenant.tenant_id}`}>Usage</a> · <a href={`#/audit?tenant_id=${tenant.tenant_id}`}>Audit log</a>
        </dd>
      </dl>

      {!deleted && (
        <section aria-label="Actions">
          <h2>Keys and state</h2>
          <div class="actions">
            {ACTIONS.filter((a) => !a.when || a.when(tenant)).map((a) => (
              <ConfirmButton id={`action-${a.id}`} label={a.label} title={`${a.label}?`} danger={a.danger} onConfirm={() => void act(a.path, a.label)}>
                <p>{a.what}</p>
              </ConfirmButton>
            ))}
            <ConfirmButton id="action-delete" label="Delete tenant" title="Delete this tenant for good?" danger onConfirm={() => void remove()}>
              <p>
                Destroys its keys, host-sync credential, name, labels, rules, limits and usage; refuses its tokens and closes its connections everywhere. The id is never reused. This cannot be undone.
              </p>
            </ConfirmButton>
          </div>
          {last && <AnswerView answer={last.answer} onRetry={last.retry} what={last.what} />}
          {secret && <CredentialOnce clientId={secret.host_sync_client_id} secret={secret.host_sync_client_secret} onDone={() => setSecret(null)} />}
        </section>
      )}
      {deleted && last && <AnswerView answer={last.answer} what={last.what} />}
      {!deleted && <RulesEditor tenantId={tenantId} />}
      {!deleted && <LimitsEditor tenantId={tenantId} />}
    </>
  );
}

function RulesEditor({ tenantId }: { tenantId: string }) {
  const path = { tenant_id: tenantId };
  const [text, setText] = useState('');
  const [version, setVersion] = useState<number | null>(null);
  const [last, setLast] = useState<{ answer: Answer; retry: () => void } | null>(null);
  const show = (rules: unknown, v: number) => {
    setText(JSON.stringify(rules, null, 2));
    setVersion(v);
  };
  useEffect(() => {
    void answerOf(api.GET('/admin/tenants/{tenant_id}/channel_rules', { params: { path } })).then((a) => a.data && show(a.data.rules, a.data.version));
  }, [tenantId]);
  const save = async () => {
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      // Sent as typed: the API's own answer (invalid_body) is what the operator sees.
      doc = undefined;
    }
    setLast(null);
    const a = await answerOf(
      api.PUT('/admin/tenants/{tenant_id}/channel_rules', {
        params: { path },
        body: doc as never,
        ...(doc === undefined && { bodySerializer: () => text }),
      }),
    );
    setLast({ answer: a, retry: () => void save() });
    if (a.data) show(a.data.rules, a.data.version);
  };
  const reset = async () => {
    setLast(null);
    const a = await answerOf(api.DELETE('/admin/tenants/{tenant_id}/channel_rules', { params: { path } }));
    setLast({ answer: a, retry: () => void reset() });
    if (a.data) show(a.data.rules, a.data.version);
  };
  return (
    <section aria-labelledby="rules-title">
      <h2 id="rules-title">Channel rules {version !== null && <small>version {version}</small>}</h2>
      <label for="rules-text" class="visually-hidden">
        Channel rules document (JSON)
      </label>
      <textarea id="rules-text" rows={12} spellcheck={false} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      <div class="actions">
        <button type="button" id="rules-save" onClick={() => void save()}>
          Save rules
        </button>
        <ConfirmButton id="rules-reset" label="Reset to default" title="Reset the channel rules?" onConfirm={() => void reset()}>
          <p>Goes back to the default document: every action on every channel, presence on presence:*. Live subscriptions are not dropped.</p>
        </ConfirmButton>
      </div>
      {last && <AnswerView answer={last.answer} onRetry={last.retry} />}
    </section>
  );
}

function LimitsEditor({ tenantId }: { tenantId: string }) {
  const path = { tenant_id: tenantId };
  const [view, setView] = useState<TenantLimitsView | null>(null);
  const [plans, setPlans] = useState<string[]>([]);
  const [plan, setPlan] = useState('');
  const [overrides, setOverrides] = useState<Record<string, string>>({});
  const [last, setLast] = useState<{ answer: Answer; retry: () => void } | null>(null);
  const show = (v: TenantLimitsView) => {
    setView(v);
    setPlan(v.plan ?? '');
    setOverrides(Object.fromEntries(Object.entries(v.overrides).map(([k, n]) => [k, String(n)])));
  };
  useEffect(() => {
    void answerOf(api.GET('/admin/tenants/{tenant_id}/limits', { params: { path } })).then((a) => a.data && show(a.data));
    void answerOf(api.GET('/admin/plans')).then((a) => a.data && setPlans(a.data.plans.map((p) => p.name)));
  }, [tenantId]);
  const save = async (e?: Event) => {
    e?.preventDefault();
    // Numbers as typed: a value the API refuses comes back with its problem.
    const doc: Record<string, number> = {};
    for (const [k, v] of Object.entries(overrides)) if (v.trim() !== '') doc[k] = Number(v);
    setLast(null);
    const a = await answerOf(api.PUT('/admin/tenants/{tenant_id}/limits', { params: { path }, body: { plan: plan || null, overrides: doc as LimitsDocument } }));
    setLast({ answer: a, retry: () => void save() });
    if (a.data) show(a.data);
  };
  return (
    <section aria-labelledby="limits-title">
      <h2 id="limits-title">Plan and limits {view && <small>version {view.limits_version}</small>}</h2>
      <form onSubmit={save} id="limits-form">
        <label>
          Plan
          <select id="limits-plan" value={plan} onChange={(e) => setPlan(e.currentTarget.value)}>
            <option value="">none</option>
            {plans.map((p) => (
              <option value={p}>{p}</option>
            ))}
          </select>
        </label>
        <div class="limits-grid">
          {LIMIT_KEYS.map((k) => (
            <label>
              <span>{k}</span>
              <input
                name={k}
                inputMode="numeric"
                placeholder={view?.limits[k] !== undefined ? `in force: ${view.limits[k]}` : 'default'}
                value={overrides[k] ?? ''}
                onInput={(e) => setOverrides({ ...overrides, [k]: e.currentTarget.value })}
              />
            </label>
          ))}
        </div>
        <button type="submit" id="limits-save">
          Save limits
        </button>
      </form>
      {last && <AnswerView answer={last.answer} onRetry={last.retry} />}
    </section>
  );
}
