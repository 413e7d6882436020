import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createMetricsRegistry } from '@service-relay/core';
import { createGatewayMetrics } from '@service-relay/edge-gateway';
import type { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createVerifierMetrics } from '../../services/auth-verifier/src/metrics';
import { createRealtimeMetrics } from '../../services/realtime/src/metrics';
import { createRegistryMetrics } from '../../services/tenant-registry/src/metrics';
import { repoDir } from './kustomize';
import { ALERTS_FILE, alertRules, dashboardPanels, metricNames } from './promql';

// deploy/prometheus/alerts.yml and deploy/grafana/service-relay.json name only
// series the services really export: the metric registries are built here the
// way the services build them (their own metrics modules, core's default
// process metrics), and the tenant feed's series from the prefixes the servers
// pass to addMetrics. `promtool check rules` runs too when promtool is on PATH
// (or PROMTOOL names it; Debian's `prometheus` package ships it, and .ci/run
// installs it). The same names are checked against the live /metrics of every
// pod in tests/faults/rolling-upgrade.test.ts.

const rules = alertRules();
const dashboard = { panels: dashboardPanels() };
const dashboardExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

async function exportedNames(): Promise<Set<string>> {
  const registries: Registry[] = [createMetricsRegistry('test'), createVerifierMetrics().registry, createGatewayMetrics().registry, createRealtimeMetrics().registry, createRegistryMetrics().registry];
  const names = new Set<string>();
  for (const r of registries) {
    for (const m of await r.getMetricsAsJSON()) {
      names.add(m.name);
      if (String(m.type) === 'histogram') for (const s of ['_bucket', '_count', '_sum']) names.add(m.name + s);
    }
  }
  // The tenant feed's gauges and counter, under each consumer's prefix.
  const feedSource = readFileSync(repoDir('packages/tenant-events/src/tenant-feed.ts'), 'utf8');
  const feedSuffixes = [...feedSource.matchAll(/name: `\$\{prefix\}(_\w+)`/g)].map((m) => m[1]!);
  expect(feedSuffixes).toContain('_tenant_feed_current');
  for (const svc of ['auth-verifier', 'edge-gateway', 'realtime']) {
    const server = readFileSync(repoDir(`services/${svc}/src/server.ts`), 'utf8');
    const prefix = /addMetrics\([^,]+,\s*'(\w+)'\)/.exec(server)?.[1];
    expect(prefix, `${svc} registers the tenant feed's metrics`).toBeDefined();
    for (const s of feedSuffixes) names.add(prefix + s);
  }
  return names;
}

describe('deploy/prometheus/alerts.yml and deploy/grafana/service-relay.json', () => {
  it('extracts metric names from PromQL', () => {
    expect(metricNames('sum by (service) (rate(a_total{result="x", b=~"y|z"}[5m])) > 0 or b_gauge == 0')).toEqual(['a_total', 'b_gauge']);
    expect(metricNames('histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))')).toEqual(['h_bucket']);
  });

  it('names only series the services export', async () => {
    const names = await exportedNames();
    expect(names.has('relay_realtime_connections')).toBe(true);
    const used = [...rules.map((r) => r.expr), ...dashboardExprs].flatMap((e) => metricNames(e).map((n) => [n, e] as const));
    expect(used.length).toBeGreaterThan(40);
    for (const [name, expr] of used) expect(names.has(name), `${name} in ${expr}`).toBe(true);
  });

  it('alerts on what an operator must act on, each with a severity, a summary and a runbook in docs/OPERATIONS.md', () => {
    const ops = readFileSync(repoDir('docs/OPERATIONS.md'), 'utf8');
    const anchors = new Set([...ops.matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!.toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')));
    const names = rules.map((r) => r.alert);
    expect(new Set(names).size).toBe(names.length);
    for (const r of rules) {
      expect(['critical', 'warning']).toContain(r.labels.severity);
      expect(r.annotations.summary).toBeTruthy();
      const [file, anchor] = r.annotations.runbook.split('#');
      expect(file).toBe('docs/OPERATIONS.md');
      expect(anchors.has(anchor!), `runbook heading for ${r.alert}`).toBe(true);
    }
    const selects = (metric: string, matcher = '') => rules.some((r) => metricNames(r.expr).includes(metric) && r.expr.includes(matcher));
    expect(selects('relay_verifier_verifications_total', 'result="unavailable"')).toBe(true);
    expect(selects('gateway_auth_verify_seconds_count', 'outcome="unavailable"')).toBe(true);
    expect(selects('relay_registry_propagations_total', 'result="not_propagated"')).toBe(true);
    for (const p of ['verifier', 'gateway', 'realtime']) expect(selects(`relay_${p}_tenant_feed_current`, '== 0'), p).toBe(true);
    expect(selects('relay_realtime_closes_total', 'code="1013"')).toBe(true);
    expect(selects('relay_realtime_connections')).toBe(true);
    expect(selects('relay_realtime_recoveries_total', 'result="history_lost"')).toBe(true);
    expect(selects('relay_realtime_limit_refusals_total', 'limit="tenant_connections"')).toBe(true);
    expect(selects('gateway_http_requests_total', 'status=~"5.."')).toBe(true);
  });

  it('sets the connection-saturation threshold at 80 % of the MAX_CONNECTIONS the manifests set', () => {
    const config = parse(readFileSync(repoDir('deploy/kubernetes/base/config.yaml'), 'utf8')) as { data: Record<string, string> };
    const threshold = Number(/> (\d+)/.exec(rules.find((r) => r.alert === 'RelayConnectionSaturation')!.expr)![1]);
    expect(threshold).toBe(0.8 * Number(config.data.MAX_CONNECTIONS));
    // The dashboard's saturation panel divides by the same MAX_CONNECTIONS.
    const saturation = dashboardExprs.filter((e) => e.includes('relay_realtime_connections) /'));
    expect(saturation.length).toBe(1);
    expect(Number(/\/ (\d+)/.exec(saturation[0]!)![1])).toBe(Number(config.data.MAX_CONNECTIONS));
  });

  it('shows every series the runbooks refer to on the dashboard', () => {
    const shown = new Set(dashboardExprs.flatMap(metricNames));
    for (const n of [
      'gateway_http_requests_total',
      'gateway_auth_verify_seconds_count',
      'relay_verifier_verifications_total',
      'relay_verifier_tenant_feed_current',
      'relay_gateway_tenant_feed_current',
      'relay_realtime_tenant_feed_current',
      'relay_realtime_tenant_feed_lag_seq',
      'relay_gateway_tenant_feed_lease_losses_total',
      'relay_registry_propagations_total',
      'relay_registry_propagation_seconds_bucket',
      'relay_realtime_connections',
      'relay_realtime_closes_total',
      'relay_realtime_messages_in_total',
      'relay_realtime_messages_out_total',
      'relay_realtime_recoveries_total',
      'relay_realtime_limit_refusals_total',
      'relay_realtime_presence_memberships',
      'relay_realtime_presence_events_total',
      'gateway_websockets',
    ]) {
      expect(shown.has(n), n).toBe(true);
    }
    for (const p of dashboard.panels) if (p.type !== 'row') expect(p.targets?.length, p.title).toBeGreaterThan(0);
  });

  const promtool = process.env.PROMTOOL ?? 'promtool';
  const hasPromtool = !spawnSync(promtool, ['--version']).error;
  it.runIf(hasPromtool)('passes promtool check rules', () => {
    const out = spawnSync(promtool, ['check', 'rules', ALERTS_FILE], { encoding: 'utf8' });
    expect(out.status, out.stdout + out.stderr).toBe(0);
  });
});
