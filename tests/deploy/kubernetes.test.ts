import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as verifier from '@service-relay/auth-verifier';
import * as gateway from '@service-relay/edge-gateway';
import * as realtime from '@service-relay/realtime';
import * as registry from '@service-relay/tenant-registry';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCrdSchemas } from './crd-schemas';
import { type K8sObject, kubectlKustomize, renderKustomization, repoDir } from './kustomize';

// deploy/kubernetes rendered (kubectl kustomize when installed, else the small
// renderer of ./kustomize.ts, which must agree with kubectl where both exist),
// every object validated against its schema (Kubernetes' own through
// kubernetes-models; the Gateway API and ServiceMonitor custom resources
// against their CRDs' OpenAPI schemas, kubeconform-style, ./crd-schemas.ts),
// and the deployment's invariants checked against the services' own config
// loaders: ports, probes, peers, credentials, TLS files, spread, autoscaling,
// network policies both ways, and the one public origin's two paths.

const OVERLAYS = { example: repoDir('deploy/kubernetes/overlays/example'), 'example-gateway-api': repoDir('deploy/kubernetes/overlays/example-gateway-api') };
const SERVICES = ['tenant-registry', 'auth-verifier', 'realtime', 'edge-gateway'] as const;
type Name = (typeof SERVICES)[number];
// Parsed YAML: its shape is what the schemas check.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Y = any;

const key = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;
const sorted = (list: K8sObject[]) => [...list].sort((a, b) => key(a).localeCompare(key(b)));
const rendered = Object.fromEntries(
  Object.entries(OVERLAYS).map(([n, dir]) => {
    const own = renderKustomization(dir);
    return [n, { own, kubectl: kubectlKustomize(dir) }];
  }),
) as Record<keyof typeof OVERLAYS, { own: K8sObject[]; kubectl: K8sObject[] | undefined }>;
const objectsOf = (overlay: keyof typeof OVERLAYS) => rendered[overlay].kubectl ?? rendered[overlay].own;
const objects = objectsOf('example');
const byKey = new Map(objects.map((o) => [key(o), o]));
const get = <T = Record<string, Y>>(kind: string, name: string, list = objects) => {
  const o = list === objects ? byKey.get(`${kind}/${name}`) : list.find((x) => key(x) === `${kind}/${name}`);
  if (!o) throw new Error(`no ${kind}/${name} in the rendered overlay`);
  return o as unknown as T & K8sObject;
};

type Container = Record<string, Y>;
const podSpec = (name: Name) => get('Deployment', name).spec.template.spec as Record<string, Y>;
const podLabels = (name: Name) => get('Deployment', name).spec.template.metadata.labels as Record<string, string>;
const container = (name: Name): Container => podSpec(name).containers[0];
const containerPort = (name: Name, portName: string): number => {
  const p = (container(name).ports as { name: string; containerPort: number }[]).find((x) => x.name === portName);
  if (!p) throw new Error(`${name} has no container port ${portName}`);
  return p.containerPort;
};

const MODELS: Record<string, new (data: Y) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'networking.k8s.io/v1/Ingress': Ingress,
};
const crds = loadCrdSchemas();

// The test stands in for the operator (the Secrets, as docs/OPERATIONS.md
// "Kubernetes" says to create them) and for the kubelet (the Secret volumes,
// written to a directory of this test's own).
const PEM = '-----BEGIN CERTIFICATE-----\nMIIBstub\n-----END CERTIFICATE-----\n';
const STUB_SECRETS: Record<string, Record<string, string>> = {
  'service-relay-secrets': {
    ADMIN_TOKEN: randomBytes(32).toString('base64url'),
    INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
    SECRETS_KEY: randomBytes(32).toString('base64'),
  },
  'service-relay-database': {
    DATABASE_URL: 'postgres://relay:pg-password@relay-db.postgres.svc.cluster.local:5432/relay?sslmode=verify-full&sslrootcert=/etc/service-relay/tls/postgres-ca.crt',
  },
  'service-relay-redis': { REDIS_URL: 'rediss://:redis-password@redis:6379/0' },
  'service-relay-tls': { 'redis-ca.crt': PEM, 'postgres-ca.crt': PEM },
};
const kubelet = mkdtempSync(join(tmpdir(), 'relay-k8s-volumes-'));
afterAll(() => rmSync(kubelet, { recursive: true, force: true }));

/** The environment the container of `name` starts with: envFrom, then env (secrets stubbed), its Secret volumes' paths mapped to files here. */
function containerEnv(name: Name): Record<string, string> {
  const c = container(name);
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    if (from.configMapRef) Object.assign(env, get('ConfigMap', from.configMapRef.name).data);
    else if (from.secretRef) Object.assign(env, STUB_SECRETS[from.secretRef.name]);
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const value = STUB_SECRETS[ref.name]?.[ref.key];
      // An optional key (INTERNAL_TOKEN_NEXT, set only during a rotation) absent from the Secret leaves the variable unset.
      if (value === undefined && ref.optional === true) continue;
      if (value === undefined) throw new Error(`${name}: ${e.name} refers to an unknown secret ${ref.name}/${ref.key}`);
      env[e.name] = value;
    } else if (e.valueFrom?.configMapKeyRef) env[e.name] = get('ConfigMap', e.valueFrom.configMapKeyRef.name).data[e.valueFrom.configMapKeyRef.key];
  }
  // Secret volumes: their keys as files; a variable naming a path under the mount names one of them (or nothing).
  for (const m of c.volumeMounts ?? []) {
    const secret = podSpec(name).volumes.find((v: { name: string }) => v.name === m.name)?.secret;
    if (!secret) continue;
    const dir = join(kubelet, name, m.name);
    mkdirSync(dir, { recursive: true });
    for (const [k, v] of Object.entries(STUB_SECRETS[secret.secretName] ?? {})) writeFileSync(join(dir, k), v);
    for (const k of Object.keys(env)) env[k] = env[k]!.replaceAll(`${m.mountPath}/`, `${dir}/`);
  }
  return env;
}

const load = {
  'tenant-registry': () => registry.loadConfig(containerEnv('tenant-registry'), { standalone: true }),
  'auth-verifier': () => verifier.loadConfig(containerEnv('auth-verifier'), { standalone: true }),
  realtime: () => realtime.loadConfig(containerEnv('realtime'), { standalone: true }),
  'edge-gateway': () => gateway.loadConfig(containerEnv('edge-gateway'), { standalone: true }),
};

/** The port a service answers /healthz, /readyz and /metrics on (the verifier's HTTP port is its ops listener). */
const opsPort = (name: Name): number => (name === 'auth-verifier' ? load[name]().httpPort : load[name]().opsPort);
/** The port clients (or peers) reach it on: its public or admin HTTP port, or the verifier's gRPC port. */
const servingPort = (name: Name): number =>
  name === 'tenant-registry' ? load[name]().httpPort : name === 'auth-verifier' ? load[name]().grpcPort : load[name]().port;

const hostPort = (addr: string) => {
  const u = new URL(addr.includes('://') ? addr : `grpc://${addr}`);
  return { host: u.hostname, port: Number(u.port) };
};

/** The container port a Service port (by number or name) leads to. */
function serviceTarget(svc: string, port: number | string, list = objects): number {
  const s = get('Service', svc, list);
  const p = (s.spec.ports as { name: string; port: number; targetPort: number | string }[]).find((x) => x.port === port || x.name === port);
  if (!p) throw new Error(`Service ${svc} has no port ${port}`);
  const named = (container(svc as Name).ports as { name: string; containerPort: number }[]).find((c) => c.name === p.targetPort || c.containerPort === p.targetPort);
  if (!named) throw new Error(`Service ${svc} port ${port} targets no container port`);
  expect(s.spec.selector).toEqual({ 'app.kubernetes.io/name': svc });
  return named.containerPort;
}

describe('deploy/kubernetes', () => {
  it.each(Object.keys(OVERLAYS))('renders overlays/%s (with kubectl kustomize when installed, and the built-in renderer agrees)', (overlay) => {
    const r = rendered[overlay as keyof typeof OVERLAYS];
    if (r.kubectl) expect(sorted(r.own)).toEqual(sorted(r.kubectl));
    const list = r.kubectl ?? r.own;
    expect(new Set(list.map(key)).size).toBe(list.length);
    for (const name of SERVICES) for (const kind of ['Deployment', 'Service', 'PodDisruptionBudget', 'HorizontalPodAutoscaler']) get(kind, name, list);
    for (const o of list) expect(o.metadata.namespace, key(o)).toBe('service-relay');
    // One public origin each: the Ingress, or the Gateway API's Gateway and HTTPRoute instead.
    const exposure = list.filter((o) => ['Ingress', 'Gateway', 'HTTPRoute'].includes(o.kind)).map(key).sort();
    expect(exposure).toEqual(overlay === 'example' ? ['Ingress/service-relay'] : ['Gateway/service-relay', 'HTTPRoute/service-relay']);
  });

  it.each(Object.keys(OVERLAYS))('validates every object of overlays/%s: Kubernetes kinds against their schemas, custom resources against their CRDs (kubeconform-style, strict)', (overlay) => {
    const list = objectsOf(overlay as keyof typeof OVERLAYS);
    const custom: string[] = [];
    for (const o of list) {
      const Model = MODELS[`${o.apiVersion}/${o.kind}`];
      if (Model) {
        expect(() => new Model(o).validate(), key(o)).not.toThrow();
        continue;
      }
      // No kind goes unchecked: anything without a model must have a vendored CRD schema.
      expect(crds.kinds, `a schema for ${o.apiVersion} ${o.kind}`).toContain(`${o.apiVersion}/${o.kind}`);
      expect(crds.errors(o), key(o)).toEqual([]);
      custom.push(o.kind);
    }
    expect(custom.sort()).toEqual(overlay === 'example' ? ['ServiceMonitor'] : ['Gateway', 'HTTPRoute', 'ServiceMonitor']);
  });

  it('refuses custom resources a cluster would not take: misspelt fields, values out of range, bad metadata', () => {
    const list = objectsOf('example-gateway-api');
    const route = structuredClone(get('HTTPRoute', 'service-relay', list)) as Y;
    route.spec.rules[0].timeout = route.spec.rules[0].timeouts;
    route.spec.rules[0].timeouts.request = '1 hour';
    route.spec.rules[1].backendRefs[0].port = 70000;
    expect(crds.errors(route)).toEqual([
      '/spec/rules/0 must NOT have additional properties: timeout',
      '/spec/rules/0/timeouts/request must match pattern "^([0-9]{1,5}(h|m|s|ms)){1,4}$"',
      '/spec/rules/1/backendRefs/0/port must be <= 65535',
    ]);
    const gw = structuredClone(get('Gateway', 'service-relay', list)) as Y;
    delete gw.spec.gatewayClassName;
    gw.metadata.lables = {};
    expect(crds.errors(gw)).toEqual(["/spec must have required property 'gatewayClassName'", '/metadata must NOT have additional properties: lables']);
    const monitor = structuredClone(get('ServiceMonitor', 'service-relay')) as Y;
    monitor.spec.endpoints[0].scrape_interval = '15s';
    monitor.spec.endpoints[0].scheme = 'tcp';
    expect(crds.errors(monitor).sort()).toEqual(['/spec/endpoints/0 must NOT have additional properties: scrape_interval', '/spec/endpoints/0/scheme must be equal to one of the allowed values'].sort());
  });

  it('carries no Secret, and every credential (REDIS_URL and DATABASE_URL included) comes from one, never from the ConfigMap', () => {
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    for (const name of SERVICES) {
      const env = container(name).env as { name: string; valueFrom?: { secretKeyRef?: { name: string } } }[];
      for (const e of env) if (/TOKEN|SECRETS_KEY|PASSWORD|_URL$/.test(e.name) && e.name !== 'REGISTRY_URL' && e.name !== 'REALTIME_URL') expect(e.valueFrom?.secretKeyRef, `${name} ${e.name}`).toBeDefined();
      expect(env.find((e) => e.name === 'REDIS_URL')?.valueFrom?.secretKeyRef?.name, name).toBe('service-relay-redis');
    }
    expect((container('tenant-registry').env as Y[]).find((e) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef.name).toBe('service-relay-database');
    for (const o of objects.filter((x) => x.kind === 'ConfigMap')) {
      for (const [k, v] of Object.entries((o as Y).data as Record<string, string>)) {
        expect(k).not.toMatch(/TOKEN|SECRETS_KEY|PASSWORD|REDIS_URL|DATABASE_URL/);
        expect(v, k).not.toMatch(/:\/\/[^/\s]*@/);
      }
    }
  });

  it('reads the keyring from optional keys of the Secret: SECRETS_KEY alone, both during a rotation, SECRETS_KEYS alone after (OPERATIONS "Rotating SECRETS_KEY")', () => {
    const secrets = STUB_SECRETS['service-relay-secrets']!;
    const k0 = secrets.SECRETS_KEY!;
    const k1 = `k1:${randomBytes(32).toString('base64')}`;
    const steps: Array<[Record<string, string>, string[]]> = [
      [{ SECRETS_KEY: k0 }, ['k0']],
      [{ SECRETS_KEY: k0, SECRETS_KEYS: k1 }, ['k1', 'k0']],
      [{ SECRETS_KEYS: k1 }, ['k1']],
    ];
    try {
      for (const [values, ids] of steps) {
        delete secrets.SECRETS_KEY;
        Object.assign(secrets, values);
        expect(load['tenant-registry']().secretsKeys.map((k) => k.id)).toEqual(ids);
        expect(load['auth-verifier']().cacheKeys?.ids).toEqual(ids);
      }
    } finally {
      delete secrets.SECRETS_KEYS;
      secrets.SECRETS_KEY = k0;
    }
  });

  it('gives every service every variable its configuration requires (TLS to Redis and PostgreSQL with CA files from the mounted Secret), listening on 0.0.0.0', () => {
    for (const name of SERVICES) expect(load[name], name).not.toThrow();
    const reg = load['tenant-registry']();
    const ver = load['auth-verifier']();
    const rt = load.realtime();
    const gw = load['edge-gateway']();
    expect([reg.httpHost, reg.grpcHost, reg.opsHost, ver.grpcHost, ver.httpHost, rt.host, rt.opsHost, gw.host, gw.opsHost]).toEqual(Array(9).fill('0.0.0.0'));
    expect(reg.database.kind).toBe('postgres');
    const db = new URL((reg.database as { url: string }).url);
    expect(db.searchParams.get('sslmode')).toBe('verify-full');
    expect(db.searchParams.get('sslrootcert')).toBe(join(kubelet, 'tenant-registry', 'tls', 'postgres-ca.crt'));
    const config = get('ConfigMap', 'service-relay-config').data;
    for (const c of [reg, ver, rt, gw]) {
      expect(hostPort(c.redis.url!)).toEqual({ host: 'redis', port: 6379 });
      expect(c.redis.url!.startsWith('rediss://')).toBe(true);
      expect(c.redis.tls).toEqual({ ca: PEM, servername: config.REDIS_TLS_SERVERNAME });
    }
    // The names the certificates are checked against are the real hosts the aliases point to.
    expect(config.REDIS_TLS_SERVERNAME).toBe(get('Service', 'redis').spec.externalName);
    expect(db.hostname).toBe(get('Service', 'postgres').spec.externalName);
    expect(get('Service', 'redis').spec.type).toBe('ExternalName');
    expect(get('Service', 'postgres').spec.type).toBe('ExternalName');
    // The gateway sits behind the Ingress/HTTPRoute: the client address is the forwarded one.
    expect(gw.trustProxy).toBe(true);
  });

  it('points every peer address at a Service whose port leads to the port the peer listens on', () => {
    const reg = load['tenant-registry']();
    const ver = load['auth-verifier']();
    const rt = load.realtime();
    const gw = load['edge-gateway']();
    const reaches = (addr: string, svc: Name, listening: number) => {
      const { host, port } = hostPort(addr);
      expect(host).toBe(svc);
      expect(serviceTarget(svc, port), addr).toBe(listening);
    };
    for (const c of [ver, rt, gw]) reaches(c.tenantFeed.registryAddr, 'tenant-registry', reg.grpcPort);
    reaches(rt.verifierAddr, 'auth-verifier', ver.grpcPort);
    reaches(gw.verifierAddr, 'auth-verifier', ver.grpcPort);
    reaches(reg.verifierAddr, 'auth-verifier', ver.grpcPort);
    reaches(gw.registryUrl, 'tenant-registry', reg.httpPort);
    reaches(gw.realtimeUrl, 'realtime', rt.port);
    for (const url of reg.realtimeUrls) reaches(url, 'realtime', rt.port);
  });

  it('probes every container on its ops port (startup, then liveness /healthz; readiness /readyz), which every Service also names `ops`', () => {
    for (const name of SERVICES) {
      const c = container(name);
      const ops = opsPort(name);
      expect(containerPort(name, 'ops'), name).toBe(ops);
      expect(serviceTarget(name, 'ops'), name).toBe(ops);
      expect(ops, `${name}: the ops port is not the port clients use`).not.toBe(servingPort(name));
      const portOf = (p: number | string) => (typeof p === 'number' ? p : containerPort(name, p));
      for (const [probe, path] of [['startupProbe', '/healthz'], ['livenessProbe', '/healthz'], ['readinessProbe', '/readyz']] as const) {
        expect(c[probe]?.httpGet?.path, `${name} ${probe}`).toBe(path);
        expect(portOf(c[probe].httpGet.port), `${name} ${probe}`).toBe(ops);
      }
      // The startup probe covers a slow start (migrations, the tenant feed) for a minute at least; liveness waits for it, not for a fixed delay.
      expect(c.startupProbe.periodSeconds * c.startupProbe.failureThreshold, name).toBeGreaterThanOrEqual(60);
      expect(c.livenessProbe.initialDelaySeconds ?? 0, name).toBe(0);
    }
  });

  it('limits and locks down every container, and drains it before it stops', () => {
    for (const name of SERVICES) {
      const spec = podSpec(name);
      const c = container(name);
      expect(spec.containers).toHaveLength(1);
      for (const r of ['cpu', 'memory']) {
        expect(c.resources.requests[r], `${name} requests.${r}`).toBeDefined();
        expect(c.resources.limits[r], `${name} limits.${r}`).toBeDefined();
      }
      expect(spec.securityContext.runAsNonRoot || c.securityContext.runAsNonRoot, name).toBe(true);
      expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
      // The drain: preStop delays SIGTERM until the endpoint is gone; the
      // service exits within 10 s of SIGTERM; the grace period covers both.
      const preStop = Number(c.lifecycle.preStop.exec.command[1]);
      expect(c.lifecycle.preStop.exec.command[0]).toBe('sleep');
      expect(spec.terminationGracePeriodSeconds, name).toBeGreaterThanOrEqual(preStop + 10 + 5);
      // Writable places are emptyDirs only (tsx's compile cache in /tmp); Secret volumes are read-only.
      for (const m of c.volumeMounts ?? []) {
        const v = spec.volumes.find((x: { name: string }) => x.name === m.name);
        if (v.secret) {
          expect(m.readOnly, `${name} ${m.mountPath}`).toBe(true);
          // Optional: a deployment without TLS files starts without creating the Secret.
          expect(v.secret.optional, `${name} ${m.mountPath}`).toBe(true);
          // Readable by the node user through fsGroup (0440), whichever YAML reader parsed it.
          expect(v.secret.defaultMode, `${name} ${m.mountPath}`).toBe(0o440);
        } else expect(v.emptyDir, `${name} ${m.mountPath}`).toBeDefined();
      }
      // The Dockerfile's user is `node` (uid 1000).
      expect(spec.securityContext.runAsUser).toBe(1000);
      expect(spec.securityContext.fsGroup).toBe(1000);
    }
  });

  it('spreads every service over nodes (hard) and zones (soft), and keeps its pods apart', () => {
    for (const name of SERVICES) {
      const spec = podSpec(name);
      const own = { matchLabels: { 'app.kubernetes.io/name': name } };
      const spread = Object.fromEntries((spec.topologySpreadConstraints as Y[]).map((t) => [t.topologyKey, t]));
      expect(spread['kubernetes.io/hostname'], name).toMatchObject({ maxSkew: 1, whenUnsatisfiable: 'DoNotSchedule', labelSelector: own, matchLabelKeys: ['pod-template-hash'] });
      // Soft: a cluster whose nodes have no zone label still schedules.
      expect(spread['topology.kubernetes.io/zone'], name).toMatchObject({ maxSkew: 1, whenUnsatisfiable: 'ScheduleAnyway', labelSelector: own, matchLabelKeys: ['pod-template-hash'] });
      for (const [k, v] of Object.entries(own.matchLabels)) expect(podLabels(name)[k]).toBe(v);
      const anti = spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution as Y[];
      expect(anti.some((a) => a.podAffinityTerm.topologyKey === 'kubernetes.io/hostname' && JSON.stringify(a.podAffinityTerm.labelSelector) === JSON.stringify(own)), name).toBe(true);
    }
  });

  it('keeps a disruption budget and an autoscaler on every Deployment that needs no custom-metrics adapter and scales down slowly', () => {
    for (const name of SERVICES) {
      const d = get('Deployment', name);
      const pdb = get('PodDisruptionBudget', name);
      const hpa = get('HorizontalPodAutoscaler', name);
      expect(pdb.spec.selector.matchLabels).toEqual(d.spec.selector.matchLabels);
      expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name });
      expect(hpa.spec.minReplicas).toBe(d.spec.replicas);
      expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
      // Resource metrics come from metrics-server; Pods, Object and External metrics would need an adapter.
      expect(hpa.spec.metrics.map((m: Y) => m.type), name).toEqual(hpa.spec.metrics.map(() => 'Resource'));
      expect(hpa.spec.metrics.some((m: Y) => m.resource.name === 'cpu')).toBe(true);
      for (const m of hpa.spec.metrics) expect(container(name).resources.requests[m.resource.name], `${name} requests the ${m.resource.name} its target is a share of`).toBeDefined();
      expect(hpa.spec.behavior.scaleDown.stabilizationWindowSeconds, name).toBeGreaterThanOrEqual(300);
      expect(hpa.spec.behavior.scaleDown.policies, name).toEqual([{ type: 'Pods', value: 1, periodSeconds: 300 }]);
      expect(hpa.spec.behavior.scaleUp.stabilizationWindowSeconds, name).toBe(0);
    }
    // Realtime's connections cost memory more than CPU: it scales on both.
    expect(get('HorizontalPodAutoscaler', 'realtime').spec.metrics.map((m: Y) => m.resource.name).sort()).toEqual(['cpu', 'memory']);
  });

  /** Policies that select the pods of `name` for `type`. */
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy') as Y[];
  const selects = (sel: { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values: string[] }[] } | undefined, labels: Record<string, string>) =>
    Object.entries(sel?.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
    (sel?.matchExpressions ?? []).every((e) => {
      if (e.operator === 'In') return e.values.includes(labels[e.key]!);
      throw new Error(`operator ${e.operator} not understood by this test`);
    });
  const policiesOf = (name: Name, type: 'Ingress' | 'Egress') => policies.filter((p) => p.spec.policyTypes.includes(type) && selects(p.spec.podSelector, podLabels(name)));
  const MONITORING = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } };

  /** Who may reach port `port` of `target`: 'anyone', service names, or 'prometheus'. */
  const callers = (target: Name, port: number) => {
    const who = new Set<string>();
    for (const p of policiesOf(target, 'Ingress')) {
      for (const rule of p.spec.ingress ?? []) {
        if (rule.ports && !rule.ports.some((x: { port: number }) => x.port === port)) continue;
        if (!rule.from?.length) who.add('anyone');
        for (const peer of rule.from ?? []) {
          if (peer.ipBlock) who.add('anyone');
          else if (peer.namespaceSelector) {
            expect(peer, `${p.metadata.name}: the only other namespace is monitoring's Prometheus`).toEqual(MONITORING);
            who.add('prometheus');
          } else for (const n of SERVICES) if (selects(peer.podSelector, podLabels(n))) who.add(n);
        }
      }
    }
    return [...who].sort();
  };

  it('isolates every pod both ways, lets only the gateway and realtime take outside traffic, each internal port only its callers, and the ops ports only Prometheus', () => {
    for (const name of SERVICES) {
      expect(policiesOf(name, 'Ingress').length, name).toBeGreaterThan(0);
      expect(policiesOf(name, 'Egress').length, name).toBeGreaterThan(0);
    }
    const reg = load['tenant-registry']();
    const ver = load['auth-verifier']();
    expect(callers('edge-gateway', load['edge-gateway']().port)).toContain('anyone');
    expect(callers('realtime', load.realtime().port)).toContain('anyone');
    expect(callers('tenant-registry', reg.httpPort)).toEqual(['edge-gateway']);
    expect(callers('tenant-registry', reg.grpcPort)).toEqual(['auth-verifier', 'edge-gateway', 'realtime']);
    expect(callers('auth-verifier', ver.grpcPort)).toEqual(['edge-gateway', 'realtime', 'tenant-registry']);
    for (const name of SERVICES) expect(callers(name, opsPort(name)), `${name} ops`).toEqual(['prometheus']);
    // No other port of any pod is open to outside traffic, and Prometheus reaches nothing but the ops ports.
    for (const name of SERVICES) {
      for (const { containerPort: port } of container(name).ports) {
        const who = callers(name, port);
        expect(who.includes('anyone'), `${name}:${port}`).toBe((name === 'edge-gateway' || name === 'realtime') && port === servingPort(name));
        expect(who.includes('prometheus'), `${name}:${port}`).toBe(port === opsPort(name));
      }
    }
  });

  /** Where `name` may open connections: `<service>:<port>`, `ns:<namespace>:<port>`, `dns:<port>/<proto>`, `public:<port>`. */
  const destinations = (name: Name): string[] => {
    const out = new Set<string>();
    for (const p of policiesOf(name, 'Egress')) {
      for (const rule of p.spec.egress ?? []) {
        expect(rule.ports?.length, `${p.metadata.name}: every egress rule names its ports`).toBeGreaterThan(0);
        expect(rule.to?.length, `${p.metadata.name}: every egress rule names its destination`).toBeGreaterThan(0);
        for (const to of rule.to) {
          for (const { port, protocol } of rule.ports as { port: number; protocol: string }[]) {
            if (to.ipBlock) {
              expect(to.ipBlock.except, `${p.metadata.name}: public addresses only`).toEqual(expect.arrayContaining(to.ipBlock.cidr === '0.0.0.0/0' ? ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '127.0.0.0/8', '100.64.0.0/10'] : ['fc00::/7', 'fe80::/10', '::1/128']));
              out.add(`public:${port}/${protocol}`);
            } else if (to.namespaceSelector) {
              const ns = to.namespaceSelector.matchLabels['kubernetes.io/metadata.name'];
              if (ns === 'kube-system') {
                expect(to.podSelector).toEqual({ matchLabels: { 'k8s-app': 'kube-dns' } });
                out.add(`dns:${port}/${protocol}`);
              } else {
                expect(to.podSelector, `${p.metadata.name}: a whole namespace is the data store's`).toBeUndefined();
                out.add(`ns:${ns}:${port}/${protocol}`);
              }
            } else {
              const peers = SERVICES.filter((n) => selects(to.podSelector, podLabels(n)));
              expect(peers.length, `${p.metadata.name}: one peer per podSelector`).toBe(1);
              out.add(`${peers[0]}:${port}/${protocol}`);
            }
          }
        }
      }
    }
    return [...out].sort();
  };

  it("lets each service open connections only to what its configuration calls, DNS, and (registry, realtime) tenants' HTTPS endpoints on public addresses", () => {
    const reg = load['tenant-registry']();
    const ver = load['auth-verifier']();
    const rt = load.realtime();
    const gw = load['edge-gateway']();
    const namespaceOf = (svc: string) => /^[^.]+\.([^.]+)\.svc\./.exec(get('Service', svc).spec.externalName)![1];
    const redis = [`ns:${namespaceOf('redis')}:${hostPort(rt.redis.url!).port}/TCP`, `ns:${namespaceOf('redis')}:26379/TCP`];
    const dns = ['dns:53/TCP', 'dns:53/UDP'];
    const peer = (addr: string) => {
      const { host, port } = hostPort(addr);
      return `${host}:${serviceTarget(host, port)}/TCP`;
    };
    const want: Record<Name, string[]> = {
      'tenant-registry': [peer(reg.realtimeUrls[0]!), peer(reg.verifierAddr), `ns:${namespaceOf('postgres')}:5432/TCP`, ...redis, ...dns, 'public:443/TCP'],
      'auth-verifier': [peer(ver.tenantFeed.registryAddr), ...redis, ...dns],
      realtime: [peer(rt.verifierAddr), peer(rt.tenantFeed.registryAddr), ...redis, ...dns, 'public:443/TCP'],
      'edge-gateway': [peer(gw.verifierAddr), peer(gw.registryUrl), peer(gw.tenantFeed.registryAddr), peer(gw.realtimeUrl), ...redis, ...dns],
    };
    for (const name of SERVICES) expect(destinations(name), name).toEqual([...new Set(want[name])].sort());
    expect(new URL((reg.database as { url: string }).url).port).toBe('5432');
    // And every one of them is let in by the peer's ingress policies.
    for (const name of SERVICES) {
      for (const d of destinations(name)) {
        const m = /^([a-z-]+):(\d+)\/TCP$/.exec(d);
        if (!m || !(SERVICES as readonly string[]).includes(m[1]!)) continue;
        const admitted = callers(m[1] as Name, Number(m[2]));
        expect(admitted.includes(name) || admitted.includes('anyone'), `${name} -> ${d}: admitted ${admitted.join(', ')}`).toBe(true);
      }
    }
  });

  /** The Service and container port a route's backend leads to. */
  const backend = (svc: string, port: number | string, list: K8sObject[]) => ({ svc, port: serviceTarget(svc, port, list) });

  it('exposes one origin with an Ingress: /ws straight to realtime, everything else to the gateway, with WebSocket-friendly timeouts and a per-client connection cap', () => {
    const ing = get('Ingress', 'service-relay');
    expect(ing.spec.rules).toHaveLength(1);
    const rule = ing.spec.rules[0];
    expect(ing.spec.tls).toEqual([{ hosts: [rule.host], secretName: expect.any(String) }]);
    const paths = rule.http.paths as Y[];
    expect(paths.map((p) => [p.path, p.pathType, backend(p.backend.service.name, p.backend.service.port.name ?? p.backend.service.port.number, objects)])).toEqual([
      ['/ws', 'Exact', { svc: 'realtime', port: load.realtime().port }],
      ['/', 'Prefix', { svc: 'edge-gateway', port: load['edge-gateway']().port }],
    ]);
    const a = ing.metadata.annotations as Record<string, string>;
    // Idle between messages for up to a ping interval (client 25 s, realtime 30 s); an hour leaves room for slow networks.
    for (const t of ['proxy-read-timeout', 'proxy-send-timeout']) expect(Number(a[`nginx.ingress.kubernetes.io/${t}`]), t).toBeGreaterThanOrEqual(3600);
    // The services see only the controller's address (MAX_CONNECTIONS_PER_ADDRESS = MAX_CONNECTIONS): the cap per client is the controller's.
    expect(Number(a['nginx.ingress.kubernetes.io/limit-connections'])).toBe(1000);
    const config = get('ConfigMap', 'service-relay-config').data;
    expect(config.MAX_CONNECTIONS_PER_ADDRESS).toBe(config.MAX_CONNECTIONS);
  });

  it('exposes the same origin with a Gateway API HTTPRoute: /ws straight to realtime with no request timeout, the rest to the gateway', () => {
    const list = objectsOf('example-gateway-api');
    const gw = get('Gateway', 'service-relay', list);
    const route = get('HTTPRoute', 'service-relay', list);
    const listener = (gw.spec.listeners as Y[]).find((l) => l.name === route.spec.parentRefs[0].sectionName);
    expect(route.spec.parentRefs).toEqual([{ name: gw.metadata.name, sectionName: 'https' }]);
    expect(listener).toMatchObject({ protocol: 'HTTPS', port: 443, tls: { mode: 'Terminate' } });
    expect(route.spec.hostnames).toEqual([listener.hostname]);
    expect((route.spec.rules as Y[]).map((r) => [r.matches[0].path, backend(r.backendRefs[0].name, r.backendRefs[0].port, list), r.timeouts])).toEqual([
      [{ type: 'Exact', value: '/ws' }, { svc: 'realtime', port: load.realtime().port }, { request: '0s' }],
      [{ type: 'PathPrefix', value: '/' }, { svc: 'edge-gateway', port: load['edge-gateway']().port }, { request: '30s' }],
    ]);
    // Longer than the gateway's own upstream timeout, which answers 504 first.
    expect(30_000).toBeGreaterThan(load['edge-gateway']().upstreamTimeoutMs);
    // Both overlays are the same deployment otherwise.
    const rest = (l: K8sObject[]) => sorted(l.filter((o) => !['Ingress', 'Gateway', 'HTTPRoute'].includes(o.kind)));
    expect(rest(list)).toEqual(rest(objects));
  });

  it('has Prometheus scrape every service on its ops port through a ServiceMonitor, with job = the Service name', () => {
    const sm = get('ServiceMonitor', 'service-relay');
    const chosen = objects.filter((o) => o.kind === 'Service' && selects(sm.spec.selector, (o.metadata.labels ?? {}) as Record<string, string>)).map((o) => o.metadata.name).sort();
    expect(chosen).toEqual([...SERVICES].sort());
    expect(sm.spec.endpoints).toEqual([{ port: 'ops', path: '/metrics', interval: '15s', scrapeTimeout: '10s' }]);
    for (const name of SERVICES) expect(serviceTarget(name, 'ops'), name).toBe(opsPort(name));
    // The alert rules select by job: nothing may rename it.
    expect(sm.spec.jobLabel).toBeUndefined();
    expect(sm.spec.endpoints[0].relabelings).toBeUndefined();
  });
});
