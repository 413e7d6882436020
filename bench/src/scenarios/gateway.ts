import { makeRow, type Row } from '../lib/result-schema';
import { rotate, withWorkers, type Scenario } from '../lib/scenario';
import { summarize } from '../lib/stats';
import { signTokens } from '../lib/tokens';
import { watchCpu } from '../lib/workers';
import type { HttpLoadResult } from '../workers/http-load';

const AUTH = { name: 'gateway_auth_ratio', unit: 'req/s', baselineName: 'same gateway app, auth step off', target: 0.85 };
const MONOLITH = { name: 'gateway_vs_monolith', unit: 'req/s', baselineName: 'express + jose jwtVerify + http-proxy-middleware', target: 1.0 };
// Issue #15: the gateway's own CPU per authenticated request at most 1.1x the no-auth gateway's
// (ratio = no-auth / ours >= 1/1.1), and the monolith's at least 1.2x ours.
const CPU_NOAUTH = { name: 'gateway_cpu_vs_noauth', unit: 'cpu-µs/req', baselineName: 'same gateway app, auth step off', target: 0.91 };
const CPU_MONOLITH = { name: 'gateway_cpu_vs_monolith', unit: 'cpu-µs/req', baselineName: 'express + jose jwtVerify + http-proxy-middleware', target: 1.2 };
const CONNECTIONS = 50;
/** Distinct users whose tokens the load rotates through (a realistic mix for the gateway's cache). */
const USERS = 1000;

type Target = 'ours' | 'noauth' | 'monolith';

/**
 * Authenticated GET /api/v1/me through the real gateway (real verifier, real
 * realtime upstream) vs the same app without auth and vs a hand-rolled
 * monolith, all proxying to the same realtime process; autocannon with 50
 * connections in its own process. Ours is measured once per round and
 * serves both rows. Each timed run follows a second of unmeasured load on
 * the same target (Budget.roundWarmupSeconds), as the fan-out and transport
 * rows do: it times each server warm, not regrowing a heap shrunk while idle.
 */
export const gateway: Scenario = {
  rows: [AUTH, MONOLITH, CPU_NOAUTH, CPU_MONOLITH],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const [noauth, monolith, load] = await Promise.all([spawn('gateway-noauth'), spawn('monolith'), spawn('http-load')]);
      // Every target gets the same 1,000 users' tokens, rotated per request; the first is the probe.
      const tokens = signTokens(stack.key, USERS);
      const probe = tokens[0]!;
      const { port: noauthPort } = await noauth.call<{ port: number }>('start', {
        realtimeUrl: stack.realtimeHttp,
        registryUrl: stack.registryHttp,
        internalToken: stack.internalToken,
        mode: 'prepared',
        tokens,
      });
      const { port: monoPort } = await monolith.call<{ port: number }>('start', {
        realtimeUrl: stack.realtimeHttp,
        internalToken: stack.internalToken,
        secrets: { [stack.key.tenantId]: stack.key.secret },
      });
      const urls: Record<Target, string> = {
        ours: `${stack.gatewayUrl}/api/v1/me`,
        noauth: `http://127.0.0.1:${noauthPort}/api/v1/me`,
        monolith: `http://127.0.0.1:${monoPort}/api/v1/me`,
      };
      const servers = { ours: stack.workers.gateway, noauth, monolith };
      // Every target must answer the real 200 before it is timed.
      for (const [name, url] of Object.entries(urls)) {
        const res = await fetch(url, { headers: { authorization: `Bearer ${probe}` } });
        const body = await res.text();
        if (res.status !== 200 || !body.includes(stack.key.tenantId)) throw new Error(`${name} answered ${res.status} ${body.slice(0, 120)}`);
      }
      const runOnce = (t: Target, seconds: number) => load.call<HttpLoadResult>('run', { url: urls[t], connections: CONNECTIONS, seconds, tokens }, (seconds + 30) * 1000);
      for (const t of ['ours', 'noauth', 'monolith'] as const) await runOnce(t, budget.warmupSeconds);

      const seconds = budget.quick ? budget.seconds : 4;
      const figures: Record<Target, number[]> = { ours: [], noauth: [], monolith: [] };
      // CPU time of the server process per answered request: what each figure costs, whatever else the machine did.
      const cpuPerRequest: Record<Target, number[]> = { ours: [], noauth: [], monolith: [] };
      const busiest: Partial<Record<Target, string>> = {};
      const failures: string[] = [];
      for (let round = 0; round < budget.httpRuns; round++) {
        for (const t of rotate(['ours', 'noauth', 'monolith'] as const, round)) {
          if (budget.roundWarmupSeconds > 0) await runOnce(t, budget.roundWarmupSeconds);
          const cpu = await watchCpu([servers[t], stack.workers.realtime, stack.workers.verifier, load]);
          const u0 = await servers[t].usage();
          const r = await runOnce(t, seconds);
          const u1 = await servers[t].usage();
          busiest[t] = await cpu();
          cpuPerRequest[t].push((u1.userUs - u0.userUs + u1.systemUs - u0.systemUs) / Math.max(1, r.ok + r.non2xx));
          if (r.non2xx > 0 || r.errors > 0) failures.push(`${t}: ${r.non2xx} non-2xx ${JSON.stringify(r.otherStatuses)}, ${r.errors} errors/timeouts`);
          figures[t].push(r.rps);
        }
      }
      const perRequest = (['ours', 'noauth', 'monolith'] as const).map((t) => `${t} ${summarize(cpuPerRequest[t]).median.toFixed(0)}`).join(', ');
      const note = `${CONNECTIONS} connections, ${USERS} users' tokens; server CPU µs per request: ${perRequest}${failures.length > 0 ? `; not all answers were 200: ${failures.join('; ')}` : ''}`;
      const rows: Row[] = [
        makeRow({ ...AUTH, ours: figures.ours, baseline: figures.noauth, quick: budget.quick, limitedBy: busiest.ours, baselineLimitedBy: busiest.noauth, note }),
        makeRow({ ...MONOLITH, ours: figures.ours, baseline: figures.monolith, quick: budget.quick, limitedBy: busiest.ours, baselineLimitedBy: busiest.monolith, note }),
        // The gateway process's own CPU per answered request, from the same runs (lower is better).
        makeRow({ ...CPU_NOAUTH, ours: cpuPerRequest.ours, baseline: cpuPerRequest.noauth, lowerIsBetter: true, quick: budget.quick, note: `gateway process CPU µs per answered request, same runs as gateway_auth_ratio; target: ours ≤ 1.1× no-auth` }),
        makeRow({ ...CPU_MONOLITH, ours: cpuPerRequest.ours, baseline: cpuPerRequest.monolith, lowerIsBetter: true, quick: budget.quick, note: `gateway process CPU µs per answered request, same runs as gateway_vs_monolith; target: monolith ≥ 1.2× ours` }),
      ];
      return rows;
    }),
};
