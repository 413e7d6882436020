import { fetchSecret } from '../../support/host';
import { holdBusCut, cutBus } from './bus-cut';
import type { AdminResult, FaultStack, ServiceName } from './fault-stack';
import { CLOSE_WITHIN_MS, describeVerdict, emptyVerdict, judge, type Round, type Verdict } from './guarantee-judge';
import type { GuaranteeLoad, SocketRecord, TargetTenant } from './guarantee-load';
import type { Tenant } from './probes';

/** A fault struck around one admin call: `inject` just before it is sent; the returned `heal` runs once it answered. */
export interface CallFault {
  name: string;
  inject(round: number): Promise<() => Promise<void>>;
}

/** How long a stalled process or frozen Redis stays stopped once the call is out (the 350 ms). */
export const STALL_MS = 350;
/** Requests are judged for at least this long after each 200 (then enable is sent, or the new secret adopted). */
export const WINDOW_MS = 600;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SIGSTOP for STALL_MS from just before the call, then SIGCONT (whether or not the call answered). */
function stallFor(stop: () => void, cont: () => void): () => Promise<void> {
  stop();
  const resumed = pause(STALL_MS).then(cont);
  return () => resumed;
}

export function faults(stack: FaultStack): Record<'none' | 'verifier' | 'redis' | 'bus', CallFault> {
  return {
    none: { name: 'no fault', inject: async () => async () => {} },
    verifier: {
      name: `verifier stalled ${STALL_MS} ms (SIGSTOP/SIGCONT; verifier1, verifier2 in turn)`,
      inject: async (round) => {
        const v: ServiceName = round % 2 === 0 ? 'verifier1' : 'verifier2';
        return stallFor(() => stack.freeze(v), () => stack.resume(v));
      },
    },
    redis: { name: `Redis frozen ${STALL_MS} ms (SIGSTOP/SIGCONT)`, inject: async () => stallFor(() => stack.redis.freeze(), () => stack.redis.resume()) },
    bus: {
      name: 'registry bus cut before and held cut during the call',
      inject: async () => {
        await cutBus(stack, 'registry');
        const hold = holdBusCut(stack, 'registry', 10_000);
        return async () => {
          await hold.stop();
        };
      },
    },
  };
}

/**
 * The tenant under test as the loops sign for it, kept in step with the
 * registry: after a revoke_all the new host-sync secret (from the answer)
 * fetches the new signing secret, and the generation goes up.
 */
export class Target implements TargetTenant {
  secret: string;
  gen = 0;
  id: string;
  private clientId: string;
  private clientSecret: string;

  constructor(private readonly stack: FaultStack, t: Tenant) {
    this.id = t.id;
    this.secret = t.jwtSecret;
    this.clientId = t.clientId;
    this.clientSecret = t.clientSecret;
  }

  /** Every secret seen, for the log check. */
  readonly secrets: string[] = [];

  async adoptRevokeAll(r: AdminResult): Promise<void> {
    const b = r.body as { host_sync_client_secret?: string; tenant?: { host_sync_client_secret?: string } } | undefined;
    const secret = b?.host_sync_client_secret ?? b?.tenant?.host_sync_client_secret;
    if (!secret) throw new Error(`revoke_all answered ${r.status} without a new host-sync secret: ${r.text.slice(0, 200)}`);
    this.clientSecret = secret;
    this.secrets.push(secret);
    const res = await fetchSecret(this.stack.gatewayUrl, this.id, this.clientId, this.clientSecret);
    if (res.status !== 200) throw new Error(`host-sync fetch after revoke_all answered ${res.status}`);
    this.secret = ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    this.secrets.push(this.secret);
    this.gen++;
  }
}

export interface Judged {
  verdict: Verdict;
  line: string;
  /** Calls that answered 200 (the ones the rule judges). */
  judged: number;
}

/** Judges the rounds that answered 200 (after load.stop(), so every request in flight is recorded) and prints the line. */
export function verdictOf(fault: CallFault, op: string, rounds: Round[], load: GuaranteeLoad): Judged {
  const verdict = emptyVerdict();
  const ok = rounds.filter((r) => r.answer.status === 200);
  for (const r of ok) judge(r, load, verdict);
  const line = describeVerdict(fault.name, op, rounds, verdict);
  console.log(line);
  return { verdict, line, judged: ok.length };
}

/** One op's side of a joint round: its tenant, the load signing for it, the rounds answered so far. */
export interface Side {
  op: 'disable' | 'revoke_all';
  target: Target;
  load: GuaranteeLoad;
  rounds: Round[];
}

/**
 * `n` rounds under one fault, each striking every side's call at once: live
 * connections of each tenant on every WebSocket path, the fault, the calls
 * (a disable of one tenant and a revoke_all of another, sent together);
 * after each 200, at least WINDOW_MS of its tenant's load (and until every
 * socket open at the 200 closed, or a second passed), then the reset
 * (`enable`, or the new secret adopted). Each call is judged on its own
 * tenant's records (verdictOf, once the loads have stopped), so one fault
 * covers both ops: 20 rounds judge 20 disables and 20 revoke_alls, each made
 * under the fault, in half the time of one op after the other.
 */
export async function runRounds(stack: FaultStack, fault: CallFault, sides: Side[], n: number): Promise<void> {
  const paths: Array<[string, string]> = [
    ['realtime1', stack.realtimeWs[0]],
    ['realtime2', stack.realtimeWs[1]],
    ...stack.gatewayUrls.map((u, k): [string, string] => [`gateway${k + 1}/ws`, `${u.replace(/^http/, 'ws')}/ws`]),
  ];
  const pathOf = (side: Side) => (side.op === 'disable' ? `/admin/tenants/${side.target.id}/disable` : `/admin/tenants/${side.target.id}/jwt_secret/revoke_all`);
  for (let i = 0; i < n; i++) {
    const live = await Promise.all(sides.map((side) => Promise.all(paths.map(([via, url]) => side.load.openLive(via, url)))));
    const gens = sides.map((side) => side.target.gen);
    // Loop sockets open now stay open (unless the server closes them) until a second past the answer.
    for (const side of sides) side.load.holdOpenUntil = Date.now() + 60_000;
    const heal = await fault.inject(i);
    const answers = await Promise.all(sides.map(async (side) => {
      const answer = await stack.admin('POST', pathOf(side));
      side.load.holdOpenUntil = answer.answeredAt + CLOSE_WITHIN_MS + 100;
      return answer;
    }));
    await heal();
    await Promise.all(sides.map(async (side, k) => {
      const answer = answers[k]!;
      if (answer.status === 200) {
        // Bounded: WINDOW_MS, and up to the contract's second while a socket open at the 200 is still open.
        const openAt = (s: SocketRecord) => s.closeCode === undefined;
        for (let j = 0; j < 200; j++) {
          const now = Date.now();
          if (now >= answer.answeredAt + CLOSE_WITHIN_MS + 50) break;
          if (now >= answer.answeredAt + WINDOW_MS && !live[k]!.some(openAt) && side.load.loopSocketsOpenSince(answer.answeredAt) === 0) break;
          await pause(20);
        }
      }
      const round: Round = { op: side.op, tenantId: side.target.id, answer, revokedGen: gens[k]!, endAt: undefined };
      if (side.op === 'disable') {
        round.endAt = Date.now();
        const enabled = await stack.admin('POST', `/admin/tenants/${side.target.id}/enable`);
        if (enabled.status !== 200) throw new Error(`enable answered ${enabled.status}: ${enabled.text.slice(0, 200)}`);
      } else {
        await side.target.adoptRevokeAll(answer.status === 200 ? answer : await stack.admin('POST', pathOf(side)));
        side.load.resetPool();
      }
      side.load.closeLive();
      side.rounds.push(round);
    }));
  }
}
