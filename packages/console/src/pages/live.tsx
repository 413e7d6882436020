import { useState } from 'preact/hooks';
import { answerOf, api, type Answer, type LiveView } from '../api/client';
import { AnswerView, shortId, Table, useInterval } from '../ui';

/** Refreshed this often while the tab is visible (each refresh is one audited `live` call). */
export const LIVE_REFRESH_MS = 3000;

export function LivePage() {
  const [view, setView] = useState<LiveView | null>(null);
  const [failure, setFailure] = useState<Answer | null>(null);
  useInterval(() => {
    void answerOf(api.GET('/admin/live')).then((a) => {
      if (a.data) {
        setView(a.data);
        setFailure(null);
      } else setFailure(a);
    });
  }, LIVE_REFRESH_MS);
  return (
    <>
      <h1>Live</h1>
      <p class="sub" id="live-updated">
        {view ? `Updated ${new Date(view.at).toLocaleTimeString()} · every ${LIVE_REFRESH_MS / 1000} s` : 'Loading…'}
      </p>
      {failure && <AnswerView answer={failure} />}
      {view && (
        <div class="grid">
          <section aria-labelledby="live-instances">
            <h2 id="live-instances">Realtime instances</h2>
            <Table label="Realtime instances">
              <thead>
                <tr>
                  <th>Instance</th>
                  <th class="num">Connections</th>
                  <th class="num">Channels</th>
                  <th>Feed</th>
                </tr>
              </thead>
              <tbody id="live-instances-body">
                {view.instances.map((i) => (
                  <tr>
                    <td>
                      {i.instance_id ?? i.address}
                      <div class="sub">{i.address}</div>
                    </td>
                    {i.error !== undefined ? (
                      <td colSpan={3} class="bad">
                        {i.error}
                      </td>
                    ) : (
                      <>
                        <td class="num">{i.connections}</td>
                        <td class="num">{i.channels_open}</td>
                        <td>{i.feed_current ? <span class="state enabled">current</span> : <span class="state disabled">behind</span>}</td>
                      </>
                    )}
                  </tr>
                ))}
              </tbody>
            </Table>
          </section>
          <section aria-labelledby="live-tenants">
            <h2 id="live-tenants">Connections per tenant</h2>
            <Table label="Connections per tenant">
              <thead>
                <tr>
                  <th>Tenant</th>
                  <th class="num">Connections</th>
                </tr>
              </thead>
              <tbody id="live-tenants-body">
                {view.tenants.length === 0 && (
                  <tr>
                    <td colSpan={2}>No open connection.</td>
                  </tr>
                )}
                {view.tenants.map((t) => (
                  <tr data-tenant={t.tenant_id}>
                    <td>
                      <a href={`#/tenants/${t.tenant_id}`}>
                        <code>{t.tenant_id}</code>
                      </a>
                    </td>
                    <td class="num">{t.connections}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          </section>
          <section aria-labelledby="live-channels">
            <h2 id="live-channels">Busiest channels</h2>
            <Table label="Busiest channels">
              <thead>
                <tr>
                  <th>Channel</th>
                  <th>Tenant</th>
                  <th class="num">Subscribers</th>
                  <th class="num">Presence</th>
                </tr>
              </thead>
              <tbody id="live-channels-body">
                {view.channels.length === 0 && (
                  <tr>
                    <td colSpan={4}>No subscription.</td>
                  </tr>
                )}
                {view.channels.map((c) => (
                  <tr>
                    <td>
                      <code>{c.channel}</code>
                    </td>
                    <td>
                      <code>{shortId(c.tenant_id)}</code>
                    </td>
                    <td class="num">{c.subscribers}</td>
                    <td class="num">{c.presence ?? '–'}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          </section>
          <section aria-labelledby="live-feed">
            <h2 id="live-feed">Tenant feed (latest change {view.feed.latest_seq})</h2>
            <Table label="Tenant feed consumers">
              <thead>
                <tr>
                  <th>Consumer</th>
                  <th>Kind</th>
                  <th class="num">Applied</th>
                  <th class="num">Behind</th>
                  <th class="num">Seen</th>
                </tr>
              </thead>
              <tbody id="live-feed-body">
                {view.feed.consumers.map((c) => (
                  <tr class={c.current ? '' : 'lagging'}>
                    <td>
                      <code>{c.consumer_id}</code>
                    </td>
                    <td>{c.kind}</td>
                    <td class="num">{c.applied_seq}</td>
                    <td class="num">{c.behind === 0 ? <span class="state enabled">0</span> : <span class="state disabled">{c.behind}</span>}</td>
                    <td class="num">{(c.seen_ms_ago / 1000).toFixed(1)} s ago</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          </section>
        </div>
      )}
    </>
  );
}
