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

export interface DashboardPanel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

export const ALERTS_FILE = repoDir('deploy/prometheus/alerts.yml');
export const DASHBOARD_FILE = repoDir('deploy/grafana/service-relay.json');

export function alertRules(): AlertRule[] {
  return (parse(readFileSync(ALERTS_FILE, 'utf8')) as { groups: { name: string; rules: AlertRule[] }[] }).groups.flatMap((g) => g.rules);
}

export function dashboardPanels(): DashboardPanel[] {
  return (JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as { panels: DashboardPanel[] }).panels;
}

/** Every PromQL expression of the alert rules and the dashboard's panels. */
export function allExpressions(): string[] {
  return [...alertRules().map((r) => r.expr), ...dashboardPanels().flatMap((p) => (p.targets ?? []).map((t) => t.expr))];
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
