import { CountingHistogram, createMetricsRegistry } from '@service-relay/core';
import { Counter, type Registry } from 'prom-client';
import type { KeySourceObserver } from './keys/key-source';
import type { VerificationObserver, VerifyOutcome } from './token/token-verifier';

export interface VerifierMetrics {
  registry: Registry;
  verification: VerificationObserver;
  keys: KeySourceObserver;
}

/**
 * A labelled counter for a hot path: `slot(...labelValues)` is the label
 * set's count, a plain number to increment; the counts reach prom-client's
 * counter when the registry is read (`collect`). prom-client's own labelled
 * inc() hashes and validates the labels on every call, which cost the
 * verifier's checks 3.4% of its busy time in a CPU profile of
 * `npm run bench -- --only=verifier-transport`.
 */
function countedOnRead<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): (...values: string[]) => { n: number } {
  const slots = new Map<string, { labels: Record<L, string>; n: number }>();
  new Counter({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      for (const slot of slots.values()) {
        if (slot.n === 0) continue;
        this.inc(slot.labels, slot.n);
        slot.n = 0;
      }
    },
  });
  return (...values) => {
    const key = values.length === 1 ? values[0]! : values.join('\0');
    let slot = slots.get(key);
    if (!slot) slots.set(key, (slot = { labels: Object.fromEntries(labelNames.map((l, i) => [l, values[i] ?? ''])) as Record<L, string>, n: 0 }));
    return slot;
  };
}

/** verifications by result and reason, latency, key lookups per cache layer, faults. */
export function createVerifierMetrics(): VerifierMetrics {
  const registry = createMetricsRegistry('auth-verifier');
  const verifications = countedOnRead(registry, 'relay_verifier_verifications_total', 'Token checks by result (valid, invalid, unavailable) and reject reason', ['result', 'reason']);
  const valid = verifications('valid', '');
  const latency = new CountingHistogram(
    'relay_verifier_verify_duration_seconds',
    'Time to a verdict, key lookup included',
    [0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5],
    [registry],
  );
  const lookups = countedOnRead(registry, 'relay_verifier_key_lookups_total', 'Tenant key lookups answered per layer (local, negative, shared, registry)', ['layer']);
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
        else if ('unavailable' in outcome) verifications('unavailable', '').n++;
        else verifications('invalid', outcome.reason).n++;
      },
    },
    keys: {
      hit(layer) {
        lookups(layer).n++;
      },
      fault(layer) {
        faults.labels(layer).inc();
      },
    },
  };
}
