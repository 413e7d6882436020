/** `npm run admin -- usage` output: a table for people, CSV (RFC 4180) for spreadsheets and billing. */
export type UsageFormat = 'json' | 'table' | 'csv';

const COLUMNS = ['start', 'published_rest', 'published_ws', 'published_host', 'deliveries', 'bytes_in', 'bytes_out', 'peak_connections', 'connection_minutes', 'refusals'] as const;

interface BucketView {
  start: string;
  published: { rest: number; ws: number; host: number };
  deliveries: number;
  bytes_in: number;
  bytes_out: number;
  peak_connections: number;
  connection_minutes: number;
  refusals: Record<string, number>;
}

interface UsageBody {
  tenant_id?: string;
  buckets?: BucketView[];
  tenants?: Array<{ tenant_id: string; buckets: BucketView[] }>;
  next_cursor?: string | null;
}

function cells(b: BucketView): string[] {
  const refusals = Object.entries(b.refusals)
    .sort(([a], [c]) => (a < c ? -1 : 1))
    .map(([k, n]) => `${k}=${n}`)
    .join(' ');
  return [b.start, b.published.rest, b.published.ws, b.published.host, b.deliveries, b.bytes_in, b.bytes_out, b.peak_connections, b.connection_minutes, refusals].map(String);
}

/** One row per bucket: with a tenant_id column first (every tenant's, `usage` without an id, or one tenant's). */
export function formatUsage(body: unknown, format: UsageFormat): string {
  if (format === 'json') return JSON.stringify(body, null, 2);
  const u = body as UsageBody;
  const header = ['tenant_id', ...COLUMNS];
  const rows: string[][] = [];
  if (u.tenants) for (const t of u.tenants) for (const b of t.buckets) rows.push([t.tenant_id, ...cells(b)]);
  else for (const b of u.buckets ?? []) rows.push([u.tenant_id ?? '', ...cells(b)]);
  if (format === 'csv') return [header, ...rows].map((r) => r.map(csvCell).join(',')).join('\n');
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i === 0 || i === 1 || i === r.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  const out = [line(header), ...rows.map(line)];
  if (rows.length === 0) out.push('(no usage in this window)');
  if (u.next_cursor) out.push(`more: --cursor ${u.next_cursor}`);
  return out.join('\n');
}

function csvCell(c: string): string {
  return /[",\n\r]/.test(c) ? `"${c.replace(/"/g, '""')}"` : c;
}
