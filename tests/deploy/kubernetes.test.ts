import { randomBytes } from 'node:crypto';
import * as verifier from '@service-relay/auth-verifier';
import * as gateway from '@service-relay/edge-gateway';
import * as realtime from '@service-relay/realtime';
import * as registry from '@service-relay/tenant-registry';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { type K8sObject, kubectlKustomize, renderKustomization, repoDir } from './kustomize';

// deploy/kubernetes rendered (kubectl kustomize when installed, else the small
// renderer of ./kustomize.ts, which must agree with kubectl where both exist),
// every object validated against the Kubernetes schemas (kubernetes-models), and
// the deployment's invariants checked against the services' own config loaders.

const OVERLAY = repoDir('deploy/kubernetes/overlays/example');
const SERVICES = ['tenant-registry', 'auth-verifier', 'realtime', 'edge-gateway'] as const;
type Name = (typeof SERVICES)[number];

const own = renderKustomization(OVERLAY);
const viaKubectl = kubectlKustomize(OVERLAY);
const objects = viaKubectl ?? own;
// Parsed YAML: its shape is what the Kubernetes schemas check in the second test.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Y = any;
const key = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;
const byKey = new Map(objects.map((o) => [key(o), o]));
const get = <T = Record<string, Y>>(kind: string, name: string) => {
  const o = byKey.get(`${kind}/${name}`);
  if (!o) throw new Error(`no ${kind}/${name} in the rendered overlay`);
  return o as unknown as T & K8sObject;
};

type Container = Record<string, Y>;
const podSpec = (name: Name) => get('Deployment', name).spec.template.spec as Record<string, Y>;
const container = (name: Name): Container => podSpec(name).containers[0];

const MODELS: Record<string, new (data: Y) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};

// Secrets are referenced by name only; the test stands in for the operator.
const STUB_SECRETS: Record<string, Record<string, string>> = {
  'service-relay-secrets': {
    ADMIN_TOKEN: randomBytes(32).toString('base64url'),
    INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
    SECRETS_KEY: randomBytes(32).toString('base64'),
  },
  'service-relay-database': { DATABASE_URL: 'postgres://relay:secret@postgres:5432/relay' },
};

/** The environment the container of `name` starts with: envFrom, then env (secrets stubbed). */
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
  return env;
}

const load = {
  'tenant-registry': () => registry.loadConfig(containerEnv('tenant-registry'), { standalone: true }),
  'auth-verifier': () => verifier.loadConfig(containerEnv('auth-verifier'), { standalone: true }),
  realtime: () => realtime.loadConfig(containerEnv('realtime'), { standalone: true }),
  'edge-gateway': () => gateway.loadConfig(containerEnv('edge-gateway'), { standalone: true }),
};

/** The port a service answers /healthz, /readyz and /metrics on. */
const httpPort = (name: Name): number =>
  name === 'tenant-registry' ? load[name]().httpPort : name === 'auth-verifier' ? load[name]().httpPort : load[name]().port;

const hostPort = (addr: string) => {
  const u = new URL(addr.includes('://') ? addr : `grpc://${addr}`);
  return { host: u.hostname, port: Number(u.port) };
};

/** The container port a Service port leads to. */
function serviceTarget(svc: string, port: number): number {
  const s = get('Service', svc);
  const p = (s.spec.ports as { port: number; targetPort: number | string }[]).find((x) => x.port === port);
  if (!p) throw new Error(`Service ${svc} has no port ${port}`);
  const named = (container(svc as Name).ports as { name: string; containerPort: number }[]).find((c) => c.name === p.targetPort || c.containerPort === p.targetPort);
  if (!named) throw new Error(`Service ${svc} port ${port} targets no container port`);
  expect(s.spec.selector).toEqual({ 'app.kubernetes.io/name': svc });
  return named.containerPort;
}

describe('deploy/kubernetes (overlays/example)', () => {
  it(`renders${viaKubectl ? ' with kubectl kustomize, and the built-in renderer agrees' : ' with the built-in renderer (kubectl not installed)'}`, () => {
    const sorted = (list: K8sObject[]) => [...list].sort((a, b) => key(a).localeCompare(key(b)));
    if (viaKubectl) expect(sorted(own)).toEqual(sorted(viaKubectl));
    expect(byKey.size).toBe(objects.length);
    for (const name of SERVICES) for (const kind of ['Deployment', 'Service', 'PodDisruptionBudget', 'HorizontalPodAutoscaler']) get(kind, name);
    for (const o of objects) expect(o.metadata.namespace, key(o)).toBe('service-relay');
  });

  it('validates every object against the Kubernetes schemas', () => {
    for (const o of objects) {
      const Model = MODELS[`${o.apiVersion}/${o.kind}`];
      expect(Model, `a schema for ${o.apiVersion} ${o.kind}`).toBeDefined();
      expect(() => new Model!(o).validate(), key(o)).not.toThrow();
    }
  });

  it('carries no Secret (only references by name)', () => {
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    for (const name of SERVICES) {
      for (const e of container(name).env ?? []) {
        if (/TOKEN|KEY|DATABASE_URL|PASSWORD/.test(e.name)) expect(e.valueFrom?.secretKeyRef, `${name} ${e.name}`).toBeDefined();
      }
    }
    for (const o of objects.filter((x) => x.kind === 'ConfigMap')) {
      for (const k of Object.keys((o as Y).data ?? {})) expect(k).not.toMatch(/TOKEN|SECRETS_KEY|DATABASE_URL|PASSWORD/);
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

  it('gives every service every variable its configuration requires, listening on 0.0.0.0', () => {
    for (const name of SERVICES) expect(load[name], name).not.toThrow();
    const reg = load['tenant-registry']();
    const ver = load['auth-verifier']();
    expect([reg.httpHost, reg.grpcHost, ver.grpcHost, ver.httpHost, load.realtime().host, load['edge-gateway']().host]).toEqual(Array(6).fill('0.0.0.0'));
    expect(reg.database.kind).toBe('postgres');
    for (const name of SERVICES) expect(hostPort(load[name]().redis.url!)).toEqual({ host: 'redis', port: 6379 });
    expect(get('Service', 'redis').spec.type).toBe('ExternalName');
    expect(get('Service', 'postgres').spec.type).toBe('ExternalName');
    expect(new URL(STUB_SECRETS['service-relay-database']!.DATABASE_URL!).hostname).toBe('postgres');
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
    reaches(gw.registryUrl, 'tenant-registry', reg.httpPort);
    reaches(gw.realtimeUrl, 'realtime', rt.port);
  });

  it('probes, limits and locks down every container', () => {
    for (const name of SERVICES) {
      const spec = podSpec(name);
      const c = container(name);
      const port = httpPort(name);
      const portOf = (p: number | string) => (typeof p === 'number' ? p : c.ports.find((x: { name: string }) => x.name === p)?.containerPort);
      expect(spec.containers).toHaveLength(1);
      expect(c.readinessProbe.httpGet.path, name).toBe('/readyz');
      expect(portOf(c.readinessProbe.httpGet.port), name).toBe(port);
      expect(c.livenessProbe.httpGet.path, name).toBe('/healthz');
      expect(portOf(c.livenessProbe.httpGet.port), name).toBe(port);
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
      // Writable places are emptyDirs only (tsx's compile cache in /tmp).
      for (const m of c.volumeMounts ?? []) expect(spec.volumes.find((v: { name: string }) => v.name === m.name).emptyDir, `${name} ${m.mountPath}`).toBeDefined();
      // The Dockerfile's user is `node` (uid 1000).
      expect(spec.securityContext.runAsUser).toBe(1000);
    }
    // realtime writes only under HISTORY_DIR, and only without REDIS_URL, which is always set here.
    expect(load.realtime().redis.url).toBeDefined();
  });

  it('keeps a disruption budget and an autoscaler on every Deployment (realtime also on its connection gauge)', () => {
    for (const name of SERVICES) {
      const d = get('Deployment', name);
      const pdb = get('PodDisruptionBudget', name);
      const hpa = get('HorizontalPodAutoscaler', name);
      expect(pdb.spec.selector.matchLabels).toEqual(d.spec.selector.matchLabels);
      expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name });
      expect(hpa.spec.minReplicas).toBe(d.spec.replicas);
      expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
      expect(hpa.spec.metrics.some((m: Y) => m.type === 'Resource' && m.resource.name === 'cpu')).toBe(true);
    }
    const rt = get('HorizontalPodAutoscaler', 'realtime');
    const pods = rt.spec.metrics.find((m: Y) => m.type === 'Pods');
    expect(pods.pods.metric.name).toBe('relay_realtime_connections');
    expect(Number(pods.pods.target.averageValue)).toBeLessThan(load.realtime().connectionLimits.maxConnections);
  });

  it('lets only the gateway and realtime take outside traffic, and each internal port only its callers', () => {
    const policies = objects.filter((o) => o.kind === 'NetworkPolicy') as Y[];
    const labelsOf = (name: Name) => get('Deployment', name).spec.template.metadata.labels as Record<string, string>;
    const selects = (sel: { matchLabels?: Record<string, string>; matchExpressions?: unknown } | undefined, labels: Record<string, string>) =>
      !sel?.matchExpressions && Object.entries(sel?.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
    expect(policies.every((p) => !p.spec.matchExpressions && p.spec.policyTypes.includes('Ingress'))).toBe(true);
    // Every pod is selected by some policy (so it is isolated: default deny).
    for (const name of SERVICES) expect(policies.some((p) => selects(p.spec.podSelector, labelsOf(name))), name).toBe(true);
    const MONITORING = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } };
    /** Who may reach port `port` of `target`: 'anyone', service names, or 'prometheus'. */
    const callers = (target: Name, port: number) => {
      const who = new Set<string>();
      for (const p of policies.filter((x) => selects(x.spec.podSelector, labelsOf(target)))) {
        for (const rule of p.spec.ingress ?? []) {
          if (rule.ports && !rule.ports.some((x: { port: number }) => x.port === port)) continue;
          if (!rule.from?.length) who.add('anyone');
          for (const peer of rule.from ?? []) {
            if (peer.ipBlock) who.add('anyone');
            else if (peer.namespaceSelector) {
              expect(peer, `${p.metadata.name}: the only other namespace is monitoring's Prometheus`).toEqual(MONITORING);
              who.add('prometheus');
            } else for (const n of SERVICES) if (selects(peer.podSelector, labelsOf(n))) who.add(n);
          }
        }
      }
      return [...who].sort();
    };
    const reg = load['tenant-registry']();
    const ver = load['auth-verifier']();
    expect(callers('edge-gateway', load['edge-gateway']().port)).toContain('anyone');
    expect(callers('realtime', load.realtime().port)).toContain('anyone');
    expect(callers('tenant-registry', reg.httpPort)).toEqual(['edge-gateway', 'prometheus']);
    expect(callers('tenant-registry', reg.grpcPort)).toEqual(['auth-verifier', 'edge-gateway', 'realtime']);
    expect(callers('auth-verifier', ver.grpcPort)).toEqual(['edge-gateway', 'realtime']);
    expect(callers('auth-verifier', ver.httpPort)).toEqual(['prometheus']);
    // No other port of Y pod is open to outside traffic.
    for (const name of SERVICES) {
      for (const { containerPort } of container(name).ports) {
        const open = callers(name, containerPort).includes('anyone');
        expect(open, `${name}:${containerPort}`).toBe((name === 'edge-gateway' || name === 'realtime') && containerPort === httpPort(name));
      }
    }
  });
});
