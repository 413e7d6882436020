import { defineConfig } from 'vitest/config';

// Six named suites. `npm test` runs all of them:
// - unit:   pure logic and in-process drivers (embedded PGlite, in-memory bus),
//           and the property-based tests beside the code (*.fuzz.test.ts, *.property.test.ts)
// - int:    the same contract suites against the real PostgreSQL and Redis
// - e2e:    whole-stack tests that spawn every service as its own process
// - attack: the whole stack as processes under hostile clients (`npm run attack`)
// - faults: the distributed deployment on a private Redis and PostgreSQL that
//           the tests kill, freeze and restart (`npm run faults`)
// - ha:     Redis Cluster and Sentinel failover, on private Redis processes (`npm run ha`)
const common = {
  environment: 'node' as const,
  testTimeout: 20_000,
  hookTimeout: 60_000,
};

export default defineConfig({
  test: {
    // In CI a JSON report lets .ci/run print the plain "N passed, N failed" line.
    ...(process.env.CI === 'true' ? { reporters: ['default', 'json'], outputFile: { json: '.data/vitest-report.json' } } : {}),
    projects: [
      {
        test: {
          ...common,
          name: 'unit',
          include: ['packages/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts', 'scripts/**/*.test.ts', 'bench/src/**/*.test.ts', 'tests/deploy/**/*.test.ts'],
          exclude: ['**/*.int.test.ts', '**/node_modules/**'],
        },
      },
      {
        test: {
          ...common,
          name: 'int',
          include: ['packages/*/src/**/*.int.test.ts', 'services/*/src/**/*.int.test.ts'],
          globalSetup: ['packages/testkit/src/require-backends.ts'],
        },
      },
      {
        test: {
          ...common,
          name: 'e2e',
          include: ['tests/**/*.test.ts'],
          exclude: ['tests/faults/**', 'tests/attack/**', 'tests/deploy/**', 'tests/ha/**', '**/node_modules/**'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
          globalSetup: ['packages/testkit/src/require-backends.ts'],
        },
      },
      {
        test: {
          ...common,
          name: 'attack',
          include: ['tests/attack/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
          // After unit/int/e2e, before faults: its "others are still served
          // promptly" checks should not compete with other stacks for the CPU.
          sequence: { groupOrder: 1 },
          globalSetup: ['packages/testkit/src/require-backends.ts'],
        },
      },
      {
        test: {
          ...common,
          name: 'faults',
          include: ['tests/faults/**/*.test.ts'],
          testTimeout: 90_000,
          hookTimeout: 120_000,
          fileParallelism: false,
          // Under `npm test`, after the other suites rather than beside them: its
          // timing assertions (a revoked connection closes within one second)
          // should not compete with them for the CPU.
          sequence: { groupOrder: 2 },
          // Runs its own Redis and PostgreSQL: needs the binaries, not the shared servers.
          globalSetup: ['tests/faults/support/require-binaries.ts'],
        },
      },
      {
        test: {
          ...common,
          // Redis high availability (`npm run ha`): the Redis drivers' contract
          // suites on a private three-master Redis Cluster, and the whole stack
          // across a Sentinel failover. Starts its own Redis processes.
          name: 'ha',
          include: ['tests/ha/**/*.test.ts'],
          testTimeout: 90_000,
          hookTimeout: 120_000,
          fileParallelism: false,
          sequence: { groupOrder: 3 },
          globalSetup: ['tests/faults/support/require-binaries.ts'],
        },
      },
    ],
  },
});
