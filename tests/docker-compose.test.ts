import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnvFile } from '@service-relay/core';
import * as verifier from '@service-relay/auth-verifier';
import * as gateway from '@service-relay/edge-gateway';
import * as realtime from '@service-relay/realtime';
import * as registry from '@service-relay/tenant-registry';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from './support/processes';

// Docker is not available here, so the deployment file is checked against the
// services' own configuration loaders instead of being trusted by eye.
interface ComposeService {
  build?: { context: string; args?: Record<string, string> };
  image?: string;
  env_file?: string;
  environment?: Record<string, string>;
  ports?: string[];
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition: string }>;
  networks?: string[];
  healthcheck?: { test: string[] };
}

const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService> };
const exampleFile = parseEnvFile(readFileSync(join(REPO_ROOT, '.env.example'), 'utf8'));
// .env.example holds placeholders that every service refuses at start; an
// operator replaces them. The checks below run on generated values of the same shape.
const envFile: Record<string, string> = {
  ...exampleFile,
  ADMIN_TOKEN: randomBytes(32).toString('base64url'),
  INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
  SECRETS_KEY: randomBytes(32).toString('base64'),
};
const interpolate = (v: string) => v.replace(/\$\{(\w+)\}/g, (_m, name: string) => envFile[name] ?? '');

/** The environment a container of `name` starts with. */
function containerEnv(name: string): Record<string, string> {
  const svc = compose.services[name]!;
  expect(svc.env_file, `${name} takes its secrets from the env file`).toBe('.env');
  const env: Record<string, string> = { ...envFile };
  for (const [k, v] of Object.entries(svc.environment ?? {})) env[k] = interpolate(String(v));
  return env;
}

const hostPort = (addr: string) => {
  const u = new URL(addr.includes('://') ? addr : `grpc://${addr}`);
  return { host: u.hostname, port: Number(u.port) };
};

describe('docker-compose.yml', () => {
  const apps = {
    'tenant-registry': () => registry.loadConfig(containerEnv('tenant-registry'), { standalone: true }),
    'auth-verifier': () => verifier.loadConfig(containerEnv('auth-verifier'), { standalone: true }),
    realtime: () => realtime.loadConfig(containerEnv('realtime'), { standalone: true }),
    'edge-gateway': () => gateway.loadConfig(containerEnv('edge-gateway'), { standalone: true }),
  };

  it('refuses to start any service with the placeholder secrets of .env.example', () => {
    for (const [name, load] of Object.entries(apps)) {
      const env = { ...containerEnv(name), ADMIN_TOKEN: exampleFile.ADMIN_TOKEN!, INTERNAL_TOKEN: exampleFile.INTERNAL_TOKEN!, SECRETS_KEY: exampleFile.SECRETS_KEY! };
      const loaders: Record<string, () => unknown> = {
        'tenant-registry': () => registry.loadConfig(env, { standalone: true }),
        'auth-verifier': () => verifier.loadConfig(env, { standalone: true }),
        realtime: () => realtime.loadConfig(env, { standalone: true }),
        'edge-gateway': () => gateway.loadConfig(env, { standalone: true }),
      };
      expect(load, name).not.toThrow();
      expect(loaders[name], name).toThrow(/configuration error: (ADMIN_TOKEN|INTERNAL_TOKEN|SECRETS_KEY) /);
    }
  });

  it('binds every listener on all interfaces inside the containers (BIND_HOST), while publishing only gateway and realtime', () => {
    const reg = apps['tenant-registry']();
    const ver = apps['auth-verifier']();
    expect([reg.httpHost, reg.grpcHost, ver.grpcHost, ver.httpHost, apps.realtime().host, apps['edge-gateway']().host]).toEqual(Array(6).fill('0.0.0.0'));
    const published = (name: string) => (compose.services[name]!.ports ?? []).map((p) => Number(p.split(':').pop()));
    expect(published('tenant-registry')).toEqual([]);
    expect(published('auth-verifier')).toEqual([]);
    expect(reg.hostFetchRateLimit).toBe(60);
  });

  it('gives every service every variable its configuration requires', () => {
    for (const [name, load] of Object.entries(apps)) {
      expect(load, name).not.toThrow();
      expect(compose.services[name]!.build?.args?.SERVICE).toBe(name);
    }
    expect(registry.loadConfig(containerEnv('tenant-registry'), { standalone: true }).database.kind).toBe('postgres');
  });

  it('points every peer address at a service and port that really listens there', () => {
    const reg = apps['tenant-registry']();
    const ver = apps['auth-verifier']();
    const rt = apps.realtime();
    const gw = apps['edge-gateway']();
    expect(hostPort(ver.registryAddr)).toEqual({ host: 'tenant-registry', port: reg.grpcPort });
    expect(hostPort(rt.verifierAddr)).toEqual({ host: 'auth-verifier', port: ver.grpcPort });
    expect(hostPort(gw.verifierAddr)).toEqual({ host: 'auth-verifier', port: ver.grpcPort });
    expect(hostPort(gw.registryUrl)).toEqual({ host: 'tenant-registry', port: reg.httpPort });
    expect(hostPort(gw.realtimeUrl)).toEqual({ host: 'realtime', port: rt.port });
    const db = new URL(containerEnv('tenant-registry').DATABASE_URL!);
    expect(db.hostname).toBe('postgres');
    expect(compose.services.postgres!.environment!.POSTGRES_USER).toBe(db.username);
    expect(hostPort(containerEnv('realtime').REDIS_URL!)).toEqual({ host: 'redis', port: 6379 });
  });

  it('publishes only the gateway and realtime, on the ports they listen on', () => {
    const published = Object.entries(compose.services).filter(([, s]) => s.ports?.length).map(([n]) => n).sort();
    expect(published).toEqual(['edge-gateway', 'realtime']);
    const containerPort = (p: string) => Number(p.split(':').pop());
    expect(compose.services['edge-gateway']!.ports!.map(containerPort)).toEqual([apps['edge-gateway']().port]);
    expect(compose.services.realtime!.ports!.map(containerPort)).toEqual([apps.realtime().port]);
    for (const s of Object.values(compose.services)) expect(s.networks).toEqual(['internal']);
  });

  it('runs two verifiers and two realtime instances, and health-checks each service on its ops port (never published)', () => {
    expect(compose.services['auth-verifier']!.deploy?.replicas).toBe(2);
    expect(compose.services.realtime!.deploy?.replicas).toBe(2);
    const opsPorts: Record<string, number> = {
      'tenant-registry': apps['tenant-registry']().opsPort,
      'auth-verifier': apps['auth-verifier']().httpPort,
      realtime: apps.realtime().opsPort,
      'edge-gateway': apps['edge-gateway']().opsPort,
    };
    const published = Object.values(compose.services).flatMap((s) => (s.ports ?? []).map((p) => Number(p.split(':').pop())));
    for (const [name, port] of Object.entries(opsPorts)) {
      expect(published, name).not.toContain(port);
      expect(compose.services[name]!.healthcheck!.test.join(' ')).toContain(`http://127.0.0.1:${port}/readyz`);
    }
  });

  it('builds on a Node 22 or 24 image', () => {
    const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^FROM node:(22|24)[-.\w]*$/m);
  });
});
