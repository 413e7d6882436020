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
import { renderKustomization, repoDir } from './kustomize';
import { ALERTS_FILE, ALERTS_TEST_FILE, alertRules, dashboardPanels, isPrometheusOwn, metricNames, recordingRules } from './promql';

// deploy/prometheus/alerts.yml and deploy/grafana/service-relay.json name only
// series the services really export: the metric registries are built here the
// way the services build them (their own metrics modules, core's default
// process metrics), and the tenant feed's series from the prefixes the servers
// pass to addMetrics. `promtool check rules` and `promtool test rules`
// (deploy/prometheus/alerts.test.yml: every alert fired and left quiet) run
// with promtool from PATH (or PROMTOOL; Debian's `prometheus` package ships it,
// and .ci/run installs it): without it they skip on a developer's machine and
// fail in CI. The same names are checked against the live /metrics of every
// pod in tests/faults/rolling-upgrade.test.ts.

const rules = alertRules();
const records = recordingRules();
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
    const used = [...rules.map((r) => r.expr), ...records.map((r) => r.expr), ...dashboardExprs].flatMap((e) => metricNames(e).map((n) => [n, e] as const));
    expect(used.length).toBeGreaterThan(40);
    const recorded = new Set(records.map((r) => r.record));
    for (const [name, expr] of used) {
      // Prometheus' own series: a scrape's `up`, and what the file's recording rules record.
      if (isPrometheusOwn(name)) expect(name === 'up' || recorded.has(name), `${name} in ${expr} is recorded in alerts.yml`).toBe(true);
      else expect(names.has(name), `${name} in ${expr}`).toBe(true);
    }
  });

  it('watches the scrape of every service-relay Service the kit deploys (job = the Service name)', () => {
    const services = renderKustomization(repoDir('deploy/kubernetes/base'))
      .filter((o) => o.kind === 'Service' && (o.spec as { selector?: Record<string, string> }).selector?.['app.kubernetes.io/name'])
      .map((o) => o.metadata.name)
      .sort();
    expect(services).toEqual(['auth-verifier', 'edge-gateway', 'realtime', 'tenant-registry']);
    for (const alert of ['RelayTargetDown', 'RelayServiceDown']) {
      const expr = rules.find((r) => r.alert === alert)!.expr;
      expect(/up\{job=~"([^"]+)"\}/.exec(expr)![1]!.split('|').sort(), alert).toEqual(services);
    }
    const down = rules.find((r) => r.alert === 'RelayServiceDown')!.expr;
    for (const svc of services) expect(down).toContain(`absent(up{job="${svc}"})`);
  });

  it('scrapes, without the Operator (deploy/prometheus/prometheus.yml), exactly the ops ports the ServiceMonitor does, with job = the Service name, and loads alerts.yml', () => {
    type Relabel = { source_labels?: string[]; regex?: string; action?: string; target_label?: string };
    const prom = parse(readFileSync(repoDir('deploy/prometheus/prometheus.yml'), 'utf8')) as { rule_files: string[]; scrape_configs: { job_name: string; metrics_path: string; kubernetes_sd_configs: { role: string }[]; relabel_configs: Relabel[] }[] };
    expect(prom.rule_files).toEqual(['alerts.yml']);
    expect(prom.scrape_configs).toHaveLength(1);
    const job = prom.scrape_configs[0]!;
    expect(job.metrics_path).toBe('/metrics');
    expect(job.kubernetes_sd_configs.map((s) => s.role)).toEqual(['endpointslice']);
    const [keep, ...rest] = job.relabel_configs;
    expect(keep).toMatchObject({ source_labels: ['__meta_kubernetes_service_name', '__meta_kubernetes_endpointslice_port_name'], action: 'keep' });
    const kept = new RegExp(`^(?:${keep!.regex})$`);
    const kit = renderKustomization(repoDir('deploy/kubernetes/overlays/example'));
    const monitor = kit.find((o) => o.kind === 'ServiceMonitor') as unknown as { spec: { endpoints: { port: string }[]; selector: { matchExpressions: { values: string[] }[] } } };
    const services = kit.filter((o) => o.kind === 'Service') as unknown as { metadata: { name: string }; spec: { ports?: { name: string }[] } }[];
    for (const s of services) {
      for (const p of s.spec.ports ?? []) {
        const scrapedHere = kept.test(`${s.metadata.name};${p.name}`);
        const scrapedByMonitor = monitor.spec.selector.matchExpressions[0]!.values.includes(s.metadata.name) && monitor.spec.endpoints.some((e) => e.port === p.name);
        expect(scrapedHere, `${s.metadata.name}:${p.name}`).toBe(scrapedByMonitor);
      }
    }
    expect(rest).toContainEqual({ source_labels: ['__meta_kubernetes_service_name'], target_label: 'job' });
  });

  it('alerts on latency against the objectives with multi-window burn rates, on buckets the histograms have', async () => {
    const gateway = createGatewayMetrics();
    gateway.request('api_v1', 200, 0.01);
    const realtime = createRealtimeMetrics();
    realtime.fannedOut(1, Date.now());
    const exposed = (await gateway.registry.metrics()) + (await realtime.registry.metrics());
    const objectives = [
      { kind: 'Request', recorded: 'relay:gateway_requests_slow', histogram: 'gateway_http_request_duration_seconds', le: '0.25' },
      { kind: 'Delivery', recorded: 'relay:realtime_deliveries_slow', histogram: 'relay_realtime_fanout_latency_seconds', le: '0.1' },
    ];
    for (const o of objectives) {
      // The objective's threshold is a bucket bound, and every window is recorded from it.
      expect(exposed).toMatch(new RegExp(`${o.histogram}_bucket\\{le="${o.le}"`));
      for (const w of ['5m', '30m', '1h', '6h']) {
        const r = records.find((x) => x.record === `${o.recorded}:ratio_rate${w}`);
        expect(r, `${o.recorded}:ratio_rate${w}`).toBeDefined();
        expect(r!.expr).toContain(`le="${o.le}"`);
        expect(r!.expr.match(new RegExp(`\\[${w}\\]`, 'g'))?.length, r!.record).toBe(2);
      }
      // Google SRE's pairs for a 1 % budget over 30 days: 14.4x over 1 h and 5 m pages, 6x over 6 h and 30 m is a ticket.
      const fast = rules.find((r) => r.alert === `Relay${o.kind}LatencyBudgetFastBurn`)!;
      expect(fast.expr).toBe(`${o.recorded}:ratio_rate1h > (14.4 * 0.01) and ${o.recorded}:ratio_rate5m > (14.4 * 0.01)`);
      expect(fast.labels.severity).toBe('critical');
      const slow = rules.find((r) => r.alert === `Relay${o.kind}LatencyBudgetSlowBurn`)!;
      expect(slow.expr).toBe(`${o.recorded}:ratio_rate6h > (6 * 0.01) and ${o.recorded}:ratio_rate30m > (6 * 0.01)`);
      expect(slow.labels.severity).toBe('warning');
    }
  });

  it('has a promtool unit test that fires every alert and one that leaves it quiet', () => {
    type Case = { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] };
    const file = parse(readFileSync(ALERTS_TEST_FILE, 'utf8')) as { rule_files: string[]; tests: Case[] };
    expect(file.rule_files).toEqual(['alerts.yml']);
    const checks = file.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const r of rules) {
      const mine = checks.filter((c) => c.alertname === r.alert);
      expect(mine.some((c) => (c.exp_alerts ?? []).length > 0), `${r.alert} fired`).toBe(true);
      expect(mine.some((c) => (c.exp_alerts ?? []).length === 0), `${r.alert} left quiet`).toBe(true);
    }
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
    expect(selects('up', '== 0')).toBe(true);
    // PostgreSQL: the registry's reads failing, or the tenant feed answered from the mirror instead.
    expect(selects('relay_registry_key_requests_total', 'result="error"')).toBe(true);
    expect(selects('relay_registry_channel_rules_requests_total', 'result="error"')).toBe(true);
    expect(selects('relay_registry_feed_requests_total', 'mirror')).toBe(true);
    // Redis: realtime's message store connections, the verifiers' shared key cache.
    expect(selects('relay_realtime_redis_errors_total')).toBe(true);
    expect(selects('relay_verifier_key_source_faults_total', 'layer="shared"')).toBe(true);
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
  // CI never skips these: there a missing promtool fails them (.ci/run installs it).
  const inCi = Boolean(process.env.CI) && process.env.CI !== 'false';
  const promtoolRun = (args: string[]) => {
    expect(hasPromtool, `${promtool} not found: install Debian's prometheus package, which ships it`).toBe(true);
    return spawnSync(promtool, args, { encoding: 'utf8' });
  };
  it.runIf(hasPromtool || inCi)('passes promtool check rules', () => {
    const out = promtoolRun(['check', 'rules', ALERTS_FILE]);
    expect(out.status, out.stdout + out.stderr).toBe(0);
  });
  it.runIf(hasPromtool || inCi)('passes promtool test rules: every alert fires on its input series and stays quiet on the others', () => {
    const out = promtoolRun(['test', 'rules', ALERTS_TEST_FILE]);
    expect(out.status, out.stdout + out.stderr).toBe(0);
    expect(out.stdout).toContain('SUCCESS');
  });
});
