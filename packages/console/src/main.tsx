import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { adminToken, answerOf, api, errorCode, whenTokenRefused } from './api/client';
import { AuditPage } from './pages/audit';
import { LivePage } from './pages/live';
import { TenantPage } from './pages/tenant';
import { TenantsPage } from './pages/tenants';
import { UsagePage } from './pages/usage';

/** The hash route: #/tenants, #/tenants/<id>, #/live, #/usage?tenant=<id>, #/audit?tenant_id=<id>. */
function useRoute(): { path: string; query: URLSearchParams } {
  const read = () => {
    const [path = '', query = ''] = location.hash.replace(/^#/, '').split('?', 2);
    return { path: path || '/tenants', query: new URLSearchParams(query) };
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

function SignIn({ onSignedIn, refused }: { onSignedIn: () => void; refused: string | null }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(refused);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    adminToken.set(token.trim());
    // One cheap admin read tells whether the API takes the token.
    const a = await answerOf(api.GET('/admin/tenants', { params: { query: { limit: 1 } } }));
    setBusy(false);
    if (a.ok) return onSignedIn();
    adminToken.clear();
    setError(a.status === 401 ? 'Refused: invalid_admin_token. The API does not take this token.' : `The registry answered ${a.status} ${errorCode(a) ?? ''}`);
  };
  return (
    <main class="signin">
      <h1>service-relay console</h1>
      <form onSubmit={submit}>
        <label for="admin-token">Admin token</label>
        <input id="admin-token" type="password" autocomplete="off" required value={token} onInput={(e) => setToken(e.currentTarget.value)} />
        <p class="hint">ADMIN_TOKEN or ADMIN_TOKEN_NEXT. Kept in this tab's session only and sent as a bearer header; closing the tab forgets it.</p>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p class="error" role="alert" id="signin-error">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}

const NAV: Array<[string, string]> = [
  ['/tenants', 'Tenants'],
  ['/live', 'Live'],
  ['/usage', 'Usage'],
  ['/audit', 'Audit log'],
];

function App() {
  const [signedIn, setSignedIn] = useState(adminToken.get() !== null);
  const [refused, setRefused] = useState<string | null>(null);
  const route = useRoute();
  useEffect(() => {
    whenTokenRefused(() => {
      adminToken.clear();
      setRefused('The API refused the admin token (rotated?). Sign in again.');
      setSignedIn(false);
    });
  }, []);
  if (!signedIn) return <SignIn refused={refused} onSignedIn={() => setSignedIn(true)} />;
  const tenant = /^\/tenants\/([0-9a-f-]{36})$/.exec(route.path)?.[1];
  const signOut = () => {
    adminToken.clear();
    setRefused(null);
    setSignedIn(false);
  };
  return (
    <>
      <header>
        <a class="brand" href="#/tenants">
          service-relay
        </a>
        <nav aria-label="Pages">
          {NAV.map(([path, label]) => (
            <a href={`#${path}`} aria-current={route.path === path || (path === '/tenants' && tenant) ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <button type="button" class="signout" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>
        {tenant ? (
          <TenantPage key={tenant} tenantId={tenant} />
        ) : route.path === '/live' ? (
          <LivePage />
        ) : route.path === '/usage' ? (
          <UsagePage tenant={route.query.get('tenant') ?? ''} />
        ) : route.path === '/audit' ? (
          <AuditPage tenant={route.query.get('tenant_id') ?? ''} />
        ) : (
          <TenantsPage />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
