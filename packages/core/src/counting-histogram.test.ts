import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CountingHistogram } from './counting-histogram';

const BUCKETS = [0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5];

function pair(buckets: number[]): { ours: CountingHistogram; theirs: Histogram; a: Registry; b: Registry } {
  const a = new Registry();
  const b = new Registry();
  for (const r of [a, b]) r.setDefaultLabels({ service: 'test' });
  const ours = new CountingHistogram('relay_test_seconds', 'A test histogram', buckets, [a]);
  const theirs = new Histogram({ name: 'relay_test_seconds', help: 'A test histogram', buckets, registers: [b] });
  return { ours, theirs, a, b };
}

describe('CountingHistogram', () => {
  it('exports exactly what prom-client\'s Histogram exports for the same observations (text and JSON)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(fc.double({ min: 0, max: 5, noNaN: true }), fc.constantFrom(...BUCKETS)), { maxLength: 200 }), async (values) => {
        const { ours, theirs, a, b } = pair(BUCKETS);
        for (const v of values) {
          ours.observe(v);
          theirs.observe(v);
        }
        expect(await a.metrics()).toBe(await b.metrics());
        expect(await a.getMetricsAsJSON()).toEqual(await b.getMetricsAsJSON());
      }),
      { numRuns: 100 },
    );
  });

  it('counts a value on a bound in that bucket, above the last only in +Inf, and starts over on reset', async () => {
    const { ours, a } = pair([1, 2]);
    for (const v of [1, 1.5, 3]) ours.observe(v);
    const text = await a.metrics();
    expect(text).toContain('relay_test_seconds_bucket{le="1",service="test"} 1');
    expect(text).toContain('relay_test_seconds_bucket{le="2",service="test"} 2');
    expect(text).toContain('relay_test_seconds_bucket{le="+Inf",service="test"} 3');
    expect(text).toContain('relay_test_seconds_sum{service="test"} 5.5');
    expect(text).toContain('relay_test_seconds_count{service="test"} 3');
    expect(text).toContain('# TYPE relay_test_seconds histogram');
    a.resetMetrics();
    expect(await a.metrics()).toContain('relay_test_seconds_count{service="test"} 0');
  });
});
