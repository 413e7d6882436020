import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { formatMachine, formatMisses, formatTable } from './lib/format-table';
import { machineInfo } from './lib/machine-info';
import { failedRow, toJson, validateResults, type Row } from './lib/result-schema';
import { FULL, QUICK, type BenchContext, type Scenario } from './lib/scenario';
import { killAllWorkers, setVerbose } from './lib/workers';
import { channelRules } from './scenarios/channel-rules';
import { clusterFanout } from './scenarios/cluster-fanout';
import { connectRate } from './scenarios/connect-rate';
import { connMemory } from './scenarios/conn-memory';
import { fanout } from './scenarios/fanout';
import { gateway } from './scenarios/gateway';
import { instanceScale } from './scenarios/instance-scale';
import { latency } from './scenarios/latency';
import { revocation } from './scenarios/revocation';
import { verifierTransport } from './scenarios/verifier-transport';
import { usageMetering } from './scenarios/usage-metering';
import { verifyCore } from './scenarios/verify-core';
import { webhooks, webhooksHang } from './scenarios/webhooks';
import { wholeMachine } from './scenarios/whole-machine';
import { startStack, type Stack } from './stack/stack';

/**
 * npm run bench [-- --quick] [-- --only=fanout,gateway] [-- --verbose]
 * Starts the stack, runs every scenario, prints the table and writes
 * bench/results/latest.json (quick runs: latest-quick.json).
 */
const SCENARIOS: Record<string, Scenario> = {
  gateway,
  'verify-core': verifyCore,
  'verifier-transport': verifierTransport,
  fanout,
  'conn-memory': connMemory,
  'connect-rate': connectRate,
  latency,
  revocation,
  'channel-rules': channelRules,
  usage: usageMetering,
  webhooks,
  'webhooks-hang': webhooksHang,
  scale: instanceScale,
  'cluster-fanout': clusterFanout,
  'whole-machine': wholeMachine,
};
/**
 * Too long for --quick (about a minute per deployment); runs there only when named in --only.
 * webhooks-hang is the webhooks scenario with its receiver hanging: the quick run's webhooks row covers its code.
 * cluster-fanout starts a Redis Cluster of its own and takes ~20 s even in --quick (~80 s in full).
 */
const NOT_QUICK = new Set(['scale', 'webhooks-hang', 'cluster-fanout']);

// A name of its own in ps, so the bench is easy to tell from the services' own src/main.ts.
process.title = 'relay-bench';
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',');
setVerbose(args.includes('--verbose'));
const budget = quick ? QUICK : FULL;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

// Every exit path ends every child: normal end, error, Ctrl-C, the watchdog.
process.on('exit', killAllWorkers);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping`);
    killAllWorkers();
    process.exit(130);
  });
}
// Every side-by-side row runs 5 rounds since #34: a full run took 15 min on the
// shared 2-core machine at load 12-14 and was still in its tenth scenario
// (bench/README.md "Like for like (#34)").
const WATCHDOG_MS = quick ? 240_000 : 1_800_000;
/** The rows measured so far: printed if the watchdog fires, so a run it ends is not all lost. */
const rows: Row[] = [];
setTimeout(() => {
  log(`watchdog: the bench ran over ${WATCHDOG_MS / 1000} s, killing everything`);
  if (rows.length > 0) process.stdout.write(`\nrows measured before the watchdog:\n${formatTable(rows)}\n`);
  killAllWorkers();
  process.exit(2);
}, WATCHDOG_MS).unref();

async function main(): Promise<number> {
  const started = Date.now();
  const machine = machineInfo(quick ? 'quick' : 'full', redisUrl);
  for (const name of only ?? []) if (!SCENARIOS[name]) throw new Error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  const chosen = Object.entries(SCENARIOS).filter(([name]) => (only ? only.includes(name) : !(quick && NOT_QUICK.has(name))));
  log(`${machine.mode} run: starting the stack`);
  let stack: Stack | undefined;
  try {
    const t0 = Date.now();
    stack = await startStack({ redisUrl, log });
    log(`stack started in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const ctx: BenchContext = { budget, stack, log };
    for (const [name, scenario] of chosen) {
      const t0 = Date.now();
      log(`${name}: running`);
      try {
        rows.push(...(await scenario.run(ctx)));
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        log(`${name}: FAILED: ${why}`);
        rows.push(...scenario.rows.map((r) => failedRow(r.name, r.unit, r.baselineName, r.target, why)));
      }
      log(`${name}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
  } finally {
    await stack?.stop();
  }
  machine.duration_s = (Date.now() - started) / 1000;
  machine.load_avg_at_end = loadavg().map((l) => Math.round(l * 100) / 100);
  const results = { machine, rows };
  const problems = validateResults(results);
  if (problems.length > 0) throw new Error(`results do not match the schema: ${problems.join('; ')}`);
  const dir = fileURLToPath(new URL('../results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = `${dir}${quick ? 'latest-quick.json' : only ? 'latest-partial.json' : 'latest.json'}`;
  writeFileSync(file, toJson(results));
  process.stdout.write(`\n${formatMachine(machine)}\n\n${formatTable(rows)}\n\n${quick ? 'quick mode: speed not judged' : formatMisses(rows)}\nwritten to ${file}\n`);
  // A scenario that could not run is a failure in either mode; a missed target is not.
  return rows.some((r) => r.runs === 0) ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    killAllWorkers();
    process.exit(1);
  },
);
