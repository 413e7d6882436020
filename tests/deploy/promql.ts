import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { repoDir } from './kustomize';

// What deploy/prometheus/alerts.yml and deploy/grafana/service-relay.json ask
// Prometheus for, shared by the check against the services' registries
// (observability.test.ts) and the one against live /metrics (tests/faults).

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: { severity: string };
  annotations: { summary: string; runbook: string };
}

export interface RecordingRule {
  record: string;
  expr: string;
}

export interface DashboardPanel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

export const ALERTS_FILE = repoDir('deploy/prometheus/alerts.yml');
/** promtool unit tests of every alert (`promtool test rules`). */
export const ALERTS_TEST_FILE = repoDir('deploy/prometheus/alerts.test.yml');
export const DASHBOARD_FILE = repoDir('deploy/grafana/service-relay.json');

function rules(): (AlertRule | RecordingRule)[] {
  return (parse(readFileSync(ALERTS_FILE, 'utf8')) as { groups: { name: string; rules: (AlertRule | RecordingRule)[] }[] }).groups.flatMap((g) => g.rules);
}

export function alertRules(): AlertRule[] {
  return rules().filter((r): r is AlertRule => 'alert' in r);
}

/** The objectives' recording rules (`level:metric:operations` names, which no service exports). */
export function recordingRules(): RecordingRule[] {
  return rules().filter((r): r is RecordingRule => 'record' in r);
}

export function dashboardPanels(): DashboardPanel[] {
  return (JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as { panels: DashboardPanel[] }).panels;
}

/** Every PromQL expression of the alert and recording rules and the dashboard's panels. */
export function allExpressions(): string[] {
  return [...rules().map((r) => r.expr), ...dashboardPanels().flatMap((p) => (p.targets ?? []).map((t) => t.expr))];
}

/** Series Prometheus makes itself: a scrape's `up`, and recorded series (a colon in the name). */
export function isPrometheusOwn(name: string): boolean {
  return name === 'up' || name.includes(':');
}

/** The metric names an expression selects that a service must export. */
export function serviceMetricNames(expr: string): string[] {
  return metricNames(expr).filter((n) => !isPrometheusOwn(n));
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan']);
/** The metric names a PromQL expression selects (label matchers, ranges, strings and grouping clauses removed). */
export function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const out: string[] = [];
  for (const m of s.matchAll(/([A-Za-z_:][\w:]*)\s*(\()?/g)) {
    if (m[2] || KEYWORDS.has(m[1]!.toLowerCase())) continue;
    out.push(m[1]!);
  }
  return out;
}

/** The series names a Prometheus text exposition declares (`# TYPE`), with a histogram's and a summary's own suffixes. */
export function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\w+)$/gm)) {
    const [, name, type] = m;
    names.add(name!);
    if (type === 'histogram') for (const s of ['_bucket', '_count', '_sum']) names.add(name! + s);
    if (type === 'summary') for (const s of ['_count', '_sum']) names.add(name! + s);
  }
  return names;
}
