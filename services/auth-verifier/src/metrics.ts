import { createMetricsRegistry } from '@service-relay/core';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { KeyLayer, KeySourceObserver } from './keys/key-source';
import type { VerificationObserver, VerifyOutcome } from './token/token-verifier';

export interface VerifierMetrics {
  registry: Registry;
  verification: VerificationObserver;
  keys: KeySourceObserver;
}

/** verifications by result and reason, latency, key lookups per cache layer, faults. */
export function createVerifierMetrics(): VerifierMetrics {
  const registry = createMetricsRegistry('auth-verifier');
  const verifications = new Counter({
    name: 'relay_verifier_verifications_total',
    help: 'Token checks by result (valid, invalid, unavailable) and reject reason',
    labelNames: ['result', 'reason'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'relay_verifier_verify_duration_seconds',
    help: 'Time to a verdict, key lookup included',
    buckets: [0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5],
    registers: [registry],
  });
  const lookups = new Counter({
    name: 'relay_verifier_key_lookups_total',
    help: 'Tenant key lookups answered per layer (local, negative, shared, registry)',
    labelNames: ['layer'] as const,
    registers: [registry],
  });
  const faults = new Counter({
    name: 'relay_verifier_key_source_faults_total',
    help: 'Failed calls to the shared cache or the registry',
    labelNames: ['layer'] as const,
    registers: [registry],
  });
  // Label children resolved once per combination: the hot path then skips
  // prom-client's label hashing.
  const children = new Map<string, ReturnType<typeof verifications.labels>>();
  const child = (result: string, reason: string) => {
    const key = `${result}\0${reason}`;
    let c = children.get(key);
    if (!c) children.set(key, (c = verifications.labels(result, reason)));
    return c;
  };
  const layerChildren = new Map<KeyLayer, ReturnType<typeof lookups.labels>>();
  return {
    registry,
    verification: {
      verified(outcome: VerifyOutcome, startedAt: number) {
        latency.observe((performance.now() - startedAt) / 1000);
        if (outcome.valid) child('valid', '').inc();
        else if ('unavailable' in outcome) child('unavailable', '').inc();
        else child('invalid', outcome.reason).inc();
      },
    },
    keys: {
      hit(layer) {
        let c = layerChildren.get(layer);
        if (!c) layerChildren.set(layer, (c = lookups.labels(layer)));
        c.inc();
      },
      fault(layer) {
        faults.labels(layer).inc();
      },
    },
  };
}
