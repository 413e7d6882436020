import { CountingHistogram, createMetricsRegistry } from '@service-relay/core';
import { Counter, type Registry } from 'prom-client';
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
  // The checks' counts add up here and reach prom-client when it is read
  // (`collect`): its labelled inc() hashes and validates the labels on every
  // call, which cost the verifier's checks 3.4% of its busy time in a CPU
  // profile of `npm run bench -- --only=verifier-transport`.
  const pending = new Map<string, { labels: { result: string; reason: string }; n: number }>();
  const count = (result: string, reason: string) => {
    const key = `${result}\0${reason}`;
    let p = pending.get(key);
    if (!p) pending.set(key, (p = { labels: { result, reason }, n: 0 }));
    p.n++;
  };
  const valid = { labels: { result: 'valid', reason: '' }, n: 0 };
  pending.set('valid\0', valid);
  new Counter({
    name: 'relay_verifier_verifications_total',
    help: 'Token checks by result (valid, invalid, unavailable) and reject reason',
    labelNames: ['result', 'reason'] as const,
    registers: [registry],
    collect() {
      for (const p of pending.values()) {
        if (p.n === 0) continue;
        this.inc(p.labels, p.n);
        p.n = 0;
      }
    },
  });
  const latency = new CountingHistogram(
    'relay_verifier_verify_duration_seconds',
    'Time to a verdict, key lookup included',
    [0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5],
    [registry],
  );
  const lookupsPending = new Map<KeyLayer, number>();
  new Counter({
    name: 'relay_verifier_key_lookups_total',
    help: 'Tenant key lookups answered per layer (local, negative, shared, registry)',
    labelNames: ['layer'] as const,
    registers: [registry],
    collect() {
      for (const [layer, n] of lookupsPending) {
        if (n === 0) continue;
        this.inc({ layer }, n);
        lookupsPending.set(layer, 0);
      }
    },
  });
  const faults = new Counter({
    name: 'relay_verifier_key_source_faults_total',
    help: 'Failed calls to the shared cache or the registry',
    labelNames: ['layer'] as const,
    registers: [registry],
  });
  return {
    registry,
    verification: {
      verified(outcome: VerifyOutcome, startedAt: number) {
        latency.observe((performance.now() - startedAt) / 1000);
        if (outcome.valid) valid.n++;
        else if ('unavailable' in outcome) count('unavailable', '');
        else count('invalid', outcome.reason);
      },
    },
    keys: {
      hit(layer) {
        lookupsPending.set(layer, (lookupsPending.get(layer) ?? 0) + 1);
      },
      fault(layer) {
        faults.labels(layer).inc();
      },
    },
  };
}
