import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { answerOf, api, type Answer, type Schemas } from '../api/client';
import { AnswerView, shortId, Table } from '../ui';

type Bucket = Schemas['UsageBucket'];

const RANGES = [
  { id: '24h', label: 'Last 24 hours', hours: 24, granularity: 'hour' },
  { id: '7d', label: 'Last 7 days', hours: 7 * 24, granularity: 'hour' },
  { id: '30d', label: 'Last 30 days', hours: 30 * 24, granularity: 'day' },
  { id: '90d', label: 'Last 90 days', hours: 90 * 24, granularity: 'day' },
] as const;

const SERIES: Array<{ id: string; label: string; color: string; value: (b: Bucket) => number; peak?: boolean }> = [
  { id: 'messages', label: 'Messages published', color: '#2563eb', value: (b) => b.published.total },
  { id: 'deliveries', label: 'Deliveries', color: '#059669', value: (b) => b.deliveries },
  { id: 'connections', label: 'Peak connections', color: '#d97706', value: (b) => b.peak_connections, peak: true },
  { id: 'refusals', label: 'Refusals', color: '#dc2626', value: (b) => Object.values(b.refusals).reduce((a, n) => a + n, 0) },
];

/** One chart: every bucket of the window (empty ones are 0), so a quiet hour shows as one. */
function Chart({ id, label, color, xs, ys, peak }: { id: string; label: string; color: string; xs: number[]; ys: number[]; peak?: boolean | undefined }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = Math.max(280, Math.min(el.clientWidth || 600, 1200));
    const plot = new uPlot(
      {
        width,
        height: 180,
        legend: { show: false },
        cursor: { show: true, drag: { x: false, y: false } },
        scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.1] } },
        axes: [{ stroke: '#475569', grid: { stroke: '#e2e8f0' } }, { stroke: '#475569', grid: { stroke: '#e2e8f0' }, size: 50 }],
        series: [{}, { label, stroke: color, width: 2, fill: `${color}22`, points: { show: true, size: 5 } }],
      },
      [xs, ys],
      el,
    );
    return () => plot.destroy();
  }, [xs, ys]);
  const total = ys.reduce((a, n) => a + n, 0);
  return (
    <figure class="chart" id={`chart-${id}`} data-points={ys.filter((y) => y > 0).length} data-total={total}>
      <figcaption>
        {label} <span class="sub">{peak ? `highest ${Math.max(0, ...ys)}` : `total ${Math.round(total * 1000) / 1000}`}</span>
      </figcaption>
      <div ref={box} />
    </figure>
  );
}

export function UsagePage({ tenant }: { tenant: string }) {
  const [tenantId, setTenantId] = useState(tenant);
  const [draft, setDraft] = useState(tenant);
  const [range, setRange] = useState<(typeof RANGES)[number]['id']>('24h');
  const [data, setData] = useState<{ xs: number[]; buckets: Bucket[] } | null>(null);
  const [failure, setFailure] = useState<Answer | null>(null);
  const [top, setTop] = useState<Array<{ tenant_id: string; published: number }>>([]);

  const r = RANGES.find((x) => x.id === range)!;
  useEffect(() => {
    const to = new Date();
    const from = new Date(to.getTime() - r.hours * 3_600_000);
    const window = { from: from.toISOString(), to: to.toISOString(), granularity: r.granularity };
    let live = true;
    void answerOf(api.GET('/admin/usage', { params: { query: { ...window, limit: 10 } } })).then((a) => {
      if (live && a.data) setTop(a.data.tenants.map((t) => ({ tenant_id: t.tenant_id, published: t.totals.published.total })));
    });
    if (!tenantId) {
      setData(null);
      return;
    }
    void answerOf(api.GET('/admin/tenants/{tenant_id}/usage', { params: { path: { tenant_id: tenantId }, query: window } })).then((a) => {
      if (!live) return;
      if (!a.data) {
        setFailure(a);
        setData(null);
        return;
      }
      setFailure(null);
      // Every bucket start of the (widened) window, in seconds, for uPlot's x axis.
      const step = (r.granularity === 'hour' ? 3600 : 86_400) * 1000;
      const xs: number[] = [];
      for (let t = Date.parse(a.data.from); t < Date.parse(a.data.to) && xs.length < 2000; t += step) xs.push(t / 1000);
      setData({ xs, buckets: a.data.buckets });
    });
    return () => {
      live = false;
    };
  }, [tenantId, range]);

  const series = (value: (b: Bucket) => number) => {
    if (!data) return [];
    const byStart = new Map(data.buckets.map((b) => [Date.parse(b.start) / 1000, value(b)]));
    return data.xs.map((x) => byStart.get(x) ?? 0);
  };

  return (
    <>
      <h1>Usage</h1>
      <form
        class="filters"
        aria-label="Usage of a tenant"
        onSubmit={(e) => {
          e.preventDefault();
          setTenantId(draft.trim());
        }}
      >
        <label>
          Tenant id <input id="usage-tenant" value={draft} onInput={(e) => setDraft(e.currentTarget.value)} placeholder="pick one below" />
        </label>
        <label>
          Range
          <select id="usage-range" value={range} onChange={(e) => setRange(e.currentTarget.value as typeof range)}>
            {RANGES.map((x) => (
              <option value={x.id}>{x.label}</option>
            ))}
          </select>
        </label>
        <button type="submit">Show</button>
      </form>
      {failure && <AnswerView answer={failure} />}
      {data && (
        <div class="charts" id="usage-charts">
          {SERIES.map((s) => {
            const ys = series(s.value);
            return <Chart key={`${s.id}-${tenantId}-${range}`} id={s.id} label={s.label} color={s.color} xs={data.xs} ys={ys} peak={s.peak} />;
          })}
        </div>
      )}
      <h2>Busiest tenants in this range</h2>
      <Table label="Busiest tenants">
        <thead>
          <tr>
            <th>Tenant</th>
            <th class="num">Messages</th>
          </tr>
        </thead>
        <tbody>
          {top.length === 0 && (
            <tr>
              <td colSpan={2}>No usage in this range.</td>
            </tr>
          )}
          {top.map((t) => (
            <tr>
              <td>
                <a
                  href={`#/usage?tenant=${t.tenant_id}`}
                  onClick={() => {
                    setDraft(t.tenant_id);
                    setTenantId(t.tenant_id);
                  }}
                >
                  <code>{shortId(t.tenant_id)}</code>
                </a>
              </td>
              <td class="num">{t.published}</td>
            </tr>
          ))}
        </tbody>
      </Table>
    </>
  );
}
