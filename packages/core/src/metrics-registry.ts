import { collectDefaultMetrics, Registry } from 'prom-client';

/** One prom-client registry per service, so services in one process do not collide. */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}
