import { pinTickObjectShape } from '@service-relay/core';
import { serveWorker } from '../lib/worker-runtime';

/**
 * Runs one real service in this process, exactly as its main.ts would:
 * loadConfig(env, { standalone: true }) -> createServer(config) -> start().
 * Reports every numeric property of the server (its bound ports).
 */

export type ServiceName = 'tenant-registry' | 'auth-verifier' | 'realtime' | 'edge-gateway';

interface ServiceModule {
  loadConfig(env: Record<string, string | undefined>, opts: { standalone: boolean }): unknown;
  createServer(config: unknown): { start(): Promise<void>; stop(): Promise<void> } & Record<string, unknown>;
}

let running: { stop(): Promise<void> } | undefined;
let loaded: Promise<ServiceModule> | undefined;

/** Imports the service's code ahead of start(), so several services can load in parallel. */
function load({ service }: { service: ServiceName }): Promise<ServiceModule> {
  loaded ??= import(`@service-relay/${service}`) as Promise<ServiceModule>;
  return loaded;
}

async function start({ service, env }: { service: ServiceName; env: Record<string, string> }): Promise<Record<string, number>> {
  if (running) throw new Error('a service is already running in this worker');
  const mod = await load({ service });
  // What runMain does first in every main.ts.
  pinTickObjectShape();
  const server = mod.createServer(mod.loadConfig(env, { standalone: true }));
  await server.start();
  running = server;
  const ports: Record<string, number> = {};
  // Ports are getters on some servers, so walk the prototype chain too.
  for (let o: object | null = server; o && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const name of Object.getOwnPropertyNames(o)) {
      const v = (server as Record<string, unknown>)[name];
      if (typeof v === 'number' && !(name in ports)) ports[name] = v;
    }
  }
  return ports;
}

serveWorker({ load: async (args: { service: ServiceName }) => void (await load(args)), start }, async () => {
  await running?.stop();
});
