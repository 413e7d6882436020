import { Agent, request } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { FaultStack, ServiceName } from './support/fault-stack';
import { cpuSeconds, HostileLoad } from './support/hostile-load';
import { gatewayMe, sleepUntil, Tenant } from './support/probes';
import { finalChecks, useFaultStack } from './support/suite';

/**
 * Issue #28 item 5, "overload cannot tip the lease": the issue's hostile mix
 * (tokens of random tenants, random and wrong host-sync credentials, from 39
 * loopback addresses) offered above what this machine serves, while a valid
 * tenant makes steady requests with fresh tokens and an operator disables
 * another tenant. FAULTS_OVERLOAD_RATE changes the offered rate (requests/s)
 * to measure elsewhere on the curve.
 */
const RATE = Number(process.env.FAULTS_OVERLOAD_RATE ?? 2400);
/**
 * The attacker's connections: 4 kept alive per address by default;
 * FAULTS_OVERLOAD_LANES more of them (so that holding one after a 429 slows
 * the attacker less), FAULTS_OVERLOAD_RECONNECT=1 a new one per request.
 */
const LANES = Number(process.env.FAULTS_OVERLOAD_LANES ?? 4);
const RECONNECT = process.env.FAULTS_OVERLOAD_RECONNECT === '1';
const LOAD_MS = 20_000;
const ADDRESSES = 39;
/** The valid tenant's steady rate: one request every 20 ms, each with a token the gateway has not seen. */
const VALID_INTERVAL_MS = 20;
/** Every service that holds a tenant feed lease (all but the registries). */
const consumers = (stack: FaultStack): ServiceName[] => stack.names.filter((n) => !n.startsWith('registry'));

interface Answer {
  status: number;
  code: string;
  ms: number;
}

const validAgent = new Agent({ keepAlive: true, maxSockets: 512 });

/** GET /api/v1/me as a client sees it: status, error code (if any), wall time; 0 when no answer came in 5 s. */
function me(gatewayUrl: string, token: string): Promise<Answer> {
  const url = new URL(gatewayUrl);
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request({ host: url.hostname, port: url.port, path: '/api/v1/me', agent: validAgent, headers: { authorization: `Bearer ${token}` }, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.once('end', () => {
        let code = '';
        try {
          code = (JSON.parse(body) as { errors?: string[] }).errors?.[0] ?? '';
        } catch {
          code = 'unparsable';
        }
        resolve({ status: res.statusCode ?? 0, code, ms: performance.now() - started });
      });
    });
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', () => resolve({ status: 0, code: 'no answer', ms: performance.now() - started }));
    req.end();
  });
}

/** Each consumer's lease losses: its `*_tenant_feed_lease_losses_total` and its `tenant feed lease lost` log lines. */
async function leaseLosses(stack: FaultStack): Promise<Record<string, { metric: number; logged: number }>> {
  const out: Record<string, { metric: number; logged: number }> = {};
  for (const name of consumers(stack)) {
    const text = await stack.metrics(name);
    const m = /^\w+_tenant_feed_lease_losses_total(?:\{[^}]*\})? (\d+)/m.exec(text);
    if (!m) throw new Error(`${name} /metrics has no tenant_feed_lease_losses_total`);
    out[name] = { metric: Number(m[1]), logged: stack.services[name].logs.split('tenant feed lease lost').length - 1 };
  }
  return out;
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!);

describe('faults: overload (hostile traffic above what the machine serves)', () => {
  // The production defaults of the gateway's refused-credential budget (the stack lifts it for other tests).
  const suite = useFaultStack({ serviceEnv: { REFUSED_AUTH_BURST: '20', REFUSED_AUTH_RATE_LIMIT: '60' } });

  it(`at ${RATE} req/s of refused tokens and host-sync credentials from ${ADDRESSES} addresses, no consumer loses its lease, the valid tenant is served (p99 under 100 ms, never auth_unavailable) and a disable answers 200 within 1 s`, async () => {
    const { stack, bystander: valid } = suite;
    const disabled = await Tenant.create(stack);
    suite.tenants.push(disabled);
    const disabledToken = await disabled.token();
    expect(await gatewayMe(stack, disabledToken)).toBe(200);
    // Fresh tokens signed ahead, so signing costs nothing during the load.
    const tokens = await Promise.all(Array.from({ length: Math.ceil(LOAD_MS / VALID_INTERVAL_MS) + 10 }, () => valid.token()));
    expect((await me(stack.gatewayUrl, tokens.pop()!)).status).toBe(200);

    const lossesBefore = await leaseLosses(stack);
    const procs = stack.names.map((n) => [n, stack.services[n].pid] as const);
    const cpuBefore = procs.map(([, pid]) => cpuSeconds(pid));
    const load = new HostileLoad({ gatewayUrl: stack.gatewayUrl, rate: RATE, durationMs: LOAD_MS, addresses: ADDRESSES, tenantId: valid.id, clientId: valid.clientId, lanesPerAddress: LANES, reconnect: RECONNECT });
    const loadBefore = loadavg()[0]!;
    try {
      await load.start();
      const startedAt = Date.now();
      // The valid tenant: one request every VALID_INTERVAL_MS (open loop), each with a new token.
      const answers: Array<Promise<Answer>> = [];
      const valids = (async () => {
        for (let i = 0; i < tokens.length && Date.now() < startedAt + LOAD_MS; i++) {
          answers.push(me(stack.gatewayUrl, tokens[i]!));
          await sleepUntil(startedAt + (i + 1) * VALID_INTERVAL_MS);
        }
      })();
      // The operator, halfway through.
      await sleepUntil(startedAt + LOAD_MS / 2);
      const disable = await stack.admin('POST', `/admin/tenants/${disabled.id}/disable`);
      const disabledAfter = await gatewayMe(stack, disabledToken);
      await valids;
      const validAnswers = await Promise.all(answers);
      const hostile = await load.result();
      const wallS = (Date.now() - startedAt) / 1000;
      const cpu = procs.map(([name], i) => `${name} ${Math.round(((cpuSeconds(procs[i]![1]) - cpuBefore[i]!) / wallS) * 100)}%`);
      const lossesAfter = await leaseLosses(stack);
      const gatewayMetrics = await stack.metrics('gateway');
      const metric = (re: RegExp) => Number(re.exec(gatewayMetrics)?.[1] ?? 0);
      const held = metric(/^gateway_held_connections_total\{[^}]*\} (\d+)/m);
      const laneShed = metric(/^gateway_shed_requests_total\{reason="unproven_lane"[^}]*\} (\d+)/m);

      // Over every valid request: one that got no answer counts with the 5 s it waited.
      const latencies = validAnswers.map((a) => a.ms).sort((a, b) => a - b);
      const refusals: Record<string, number> = {};
      for (const a of validAnswers.filter((x) => x.status !== 200)) refusals[`${a.status} ${a.code}`] = (refusals[`${a.status} ${a.code}`] ?? 0) + 1;
      const lost = Object.fromEntries(consumers(stack).map((n) => [n, `${lossesAfter[n]!.metric - lossesBefore[n]!.metric}/${lossesAfter[n]!.logged - lossesBefore[n]!.logged}`]));
      const p99 = percentile(latencies, 99);
      // Where the tail is: the slowest valid answer of each 2 s of the run.
      const slices = Array.from({ length: Math.ceil(validAnswers.length / (2000 / VALID_INTERVAL_MS)) }, (_, k) => Math.round(Math.max(...validAnswers.slice(k * (2000 / VALID_INTERVAL_MS), (k + 1) * (2000 / VALID_INTERVAL_MS)).map((a) => a.ms))));
      console.log(
        `[faults] overload: hostile (${ADDRESSES} addresses, ${RECONNECT ? 'a new connection per request' : `${LANES} kept-alive connections each`}) offered ${RATE}/s for ${hostile.seconds.toFixed(1)} s, sent ${Math.round(hostile.sent / hostile.seconds)}/s (${hostile.notSent} not sent: 1024 in flight per worker), answers ${JSON.stringify(hostile.counts)}, ${hostile.pending} unanswered at the end; connections held after a 429 ${held}, shed by the unproven lane ${laneShed}`,
      );
      console.log(
        `[faults] overload: valid tenant ${validAnswers.length} requests (fresh tokens, every ${VALID_INTERVAL_MS} ms): ${validAnswers.filter((a) => a.status === 200).length} 200, refused ${JSON.stringify(refusals)}; p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${(latencies.at(-1) ?? NaN).toFixed(1)} ms; slowest per 2 s: ${slices.join(' ')} ms`,
      );
      console.log(`[faults] overload: disable ${disable.status} in ${disable.ms} ms, its cached token then ${disabledAfter}; lease losses (metric/logged) ${JSON.stringify(lost)}; CPU over ${wallS.toFixed(1)} s: ${cpu.join(', ')}; machine load average ${loadBefore.toFixed(1)} before, ${loadavg()[0]!.toFixed(1)} after (${cpus().length} cores)`);

      // The load was offered as planned (otherwise this proves nothing).
      expect(hostile.sent + hostile.notSent, 'the hostile load was offered at its rate').toBeGreaterThanOrEqual(0.9 * RATE * (LOAD_MS / 1000));
      for (const n of consumers(stack)) {
        expect([n, lossesAfter[n]!.metric - lossesBefore[n]!.metric, lossesAfter[n]!.logged - lossesBefore[n]!.logged], 'no consumer lost its tenant feed lease').toEqual([n, 0, 0]);
      }
      expect(refusals['503 auth_unavailable'] ?? 0, 'no valid request refused auth_unavailable').toBe(0);
      // Every answer the valid tenant got was a 200 (status 0: no answer within 5 s, counted in the latency figures).
      expect(Object.keys(refusals).filter((k) => !k.startsWith('0 ')), 'no valid request answered with an error').toEqual([]);
      expect(p99, 'the valid tenant\'s p99 under 100 ms').toBeLessThan(100);
      expect(disable.status, disable.text).toBe(200);
      expect(disable.ms, 'the disable answered within 1 s').toBeLessThan(1000);
      expect(disabledAfter, 'the disabled tenant refused after its 200').toBe(401);
    } finally {
      await load.stop();
    }
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
