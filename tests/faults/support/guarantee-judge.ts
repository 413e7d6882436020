import type { AdminResult } from './fault-stack';
import type { Attempt, GuaranteeLoad, SocketRecord } from './guarantee-load';

/** The contract's second for live connections of a revoked tenant (counted from the 200). */
export const CLOSE_WITHIN_MS = 1000;

/** One revoking admin call and what it revoked. */
export interface Round {
  op: 'disable' | 'revoke_all';
  tenantId: string;
  answer: AdminResult;
  /**
   * disable: every token of the tenant is revoked until `enable` was sent
   * (endAt): a request sent after the 200 must not be accepted by an answer
   * given before endAt (one answered later may have been judged on the
   * enable, rightly); revoke_all: every token signed with a secret of
   * generation <= revokedGen, for good (endAt undefined).
   */
  revokedGen: number;
  endAt: number | undefined;
}

export interface Verdict {
  /** Requests and upgrades sent after the 200 with a revoked token. */
  requestsChecked: number;
  socketsChecked: number;
  publishesChecked: number;
  /** Requests of the tenant that were accepted before the call (the load was real). */
  acceptedBefore: number;
  violations: Map<string, number>;
  /** A few examples per kind of violation, for the failure message. */
  examples: string[];
  perKind: Map<string, number>;
  /** Latest send time (ms after the 200) of a violating request or publish. */
  lastMs: number | undefined;
}

const revoked = (r: Round, tenantId: string, gen: number) => tenantId === r.tenantId && (r.op === 'disable' || gen <= r.revokedGen);
/** Sent after the 200 and (disable) answered before enable was sent. */
const inWindow = (r: Round, sentAt: number, answeredAt: number | undefined) => sentAt > r.answer.answeredAt && (r.endAt === undefined || answeredAt === undefined || answeredAt < r.endAt);

export function emptyVerdict(): Verdict {
  return { requestsChecked: 0, socketsChecked: 0, publishesChecked: 0, acceptedBefore: 0, violations: new Map(), examples: [], perKind: new Map(), lastMs: undefined };
}

/**
 * Applies issue #28's rule to one round whose call answered 200:
 * - no request sent after the 200 with a revoked token is answered 200/201,
 *   and no such upgrade gets a 101;
 * - every socket of a revoked token open when the call was sent, open at
 *   the 200, or admitted after it is closed by the server with 4401 within
 *   a second (of the 200, or of its own upgrade if that came later);
 * - no publish sent on such a socket after the 200 is acknowledged.
 */
export function judge(r: Round, load: GuaranteeLoad, into: Verdict = emptyVerdict()): Verdict {
  const t0 = r.answer.answeredAt;
  const bad = (what: string, at: number, example: string) => {
    into.violations.set(what, (into.violations.get(what) ?? 0) + 1);
    const shown = into.perKind.get(what) ?? 0;
    if (shown < 2) {
      into.perKind.set(what, shown + 1);
      into.examples.push(`${r.op}: ${example}`);
    }
    into.lastMs = Math.max(into.lastMs ?? 0, at - t0);
  };
  for (const a of load.attempts) {
    if (a.tenantId !== r.tenantId) continue;
    if (a.sentAt >= r.answer.sentAt - 1000 && a.sentAt < r.answer.sentAt && (a.status === 200 || a.status === 201 || a.status === 101)) into.acceptedBefore++;
    if (!revoked(r, a.tenantId, a.gen) || !inWindow(r, a.sentAt, a.answeredAt)) continue;
    into.requestsChecked++;
    if (a.status === 200 || a.status === 201 || a.status === 101) {
      bad(`${a.kind} ${a.status}`, a.sentAt, `${a.kind} via ${a.via} (${a.fresh ? 'fresh' : 'reused'} token) sent +${a.sentAt - t0} ms after the 200 answered ${a.status} at +${a.answeredAt - t0} ms`);
    }
  }
  const sockets: Array<{ via: string; s: SocketRecord }> = [
    ...load.attempts.filter((a): a is Attempt & { socket: SocketRecord } => a.socket !== undefined && revoked(r, a.tenantId, a.gen)).map((a) => ({ via: a.via, s: a.socket })),
    ...load.live.filter((l) => revoked(r, l.tenantId, l.gen)).map((l) => ({ via: `${l.via} (live)`, s: l.socket })),
  ];
  for (const { via, s } of sockets) {
    // Open when the call went out (closed since, it must have been by the server, with 4401), open at the 200, or admitted after it.
    const openAtCall = s.upgradedAt <= r.answer.sentAt && (s.closedAt === undefined || s.closedAt > r.answer.sentAt);
    const openAtAnswer = s.upgradedAt <= t0 && (s.closedAt === undefined || s.closedAt > t0);
    const admittedAfter = s.upgradedAt > t0 && (r.endAt === undefined || s.upgradedAt < r.endAt);
    if (!openAtCall && !openAtAnswer && !admittedAfter) continue;
    into.socketsChecked++;
    const deadline = Math.max(t0, s.upgradedAt) + CLOSE_WITHIN_MS;
    if (s.closeCode !== 4401 || s.closedByClient || s.closedAt === undefined || s.closedAt > deadline) {
      const how = s.closedByClient || s.closeCode === undefined ? 'still open' : `closed ${s.closeCode} at +${s.closedAt! - t0} ms`;
      bad('socket not closed 4401 within 1 s', deadline, `socket on ${via} open at the call or after: ${how}`);
    }
    for (const p of s.publishes) {
      if (!inWindow(r, p.sentAt, p.ackAt)) continue;
      into.publishesChecked++;
      if (p.ackAt !== undefined) bad('ws publish acknowledged', p.sentAt, `publish on ${via} sent +${p.sentAt - t0} ms after the 200 was acknowledged`);
    }
  }
  return into;
}

export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

export function violationCount(v: Verdict): number {
  return [...v.violations.values()].reduce((a, b) => a + b, 0);
}

/** The `[faults] …` line of one fault and op. */
export function describeVerdict(fault: string, op: string, rounds: Round[], v: Verdict): string {
  const ms = rounds.map((r) => r.answer.ms);
  const answers = new Map<number, number>();
  for (const r of rounds) answers.set(r.answer.status, (answers.get(r.answer.status) ?? 0) + 1);
  const viol = [...v.violations].map(([k, n]) => `${k}×${n}`).join(', ');
  return `[faults] guarantee | ${fault} | ${op}×${rounds.length}: answers ${[...answers].map(([s, n]) => `${s}×${n}`).join(' ')}, admin p50 ${percentile(ms, 50)} ms max ${Math.max(...ms)} ms | checked ${v.requestsChecked} requests/upgrades, ${v.socketsChecked} sockets, ${v.publishesChecked} publishes after the 200 (${v.acceptedBefore} accepted in the second before each call) | violations ${violationCount(v)}${viol ? ` (${viol}; last +${v.lastMs} ms after a 200)` : ''}`;
}
