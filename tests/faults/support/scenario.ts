import { expect } from 'vitest';
import type { AdminResult, FaultStack } from './fault-stack';
import { acceptedNow, closedAsRevoked, committedVersion, revokedCloseLabel, eventually, expectRevocationHonoured, expectTrafficResumes, type InForce, sleepUntil, type Tenant, watchInForce } from './probes';
import { report, type FaultSuite } from './suite';
import { Traffic } from './traffic';

export type RevokingOp = 'disable' | 'revoke_all';

export const opPath = (op: RevokingOp, tenantId: string) => (op === 'disable' ? `/admin/tenants/${tenantId}/disable` : `/admin/tenants/${tenantId}/jwt_secret/revoke_all`);

/**
 * A `call` for faults that strike between commit and answer: realtime2 is
 * stalled so the registry is still waiting for confirmations, the admin call
 * goes out, and the moment the change shows in the registry's database
 * `interrupt` runs (kill the registry, stop PostgreSQL). `timing()` says how
 * long after the commit that was, and whether the call had already answered.
 */
export function interruptAfterCommit(stack: FaultStack, interrupt: () => Promise<void>, label: string) {
  let timing = '';
  return {
    inject: async () => stack.freeze('realtime2'),
    call: async (path: string): Promise<AdminResult & { committed: true }> => {
      const tenantId = path.split('/')[3]!;
      const version = async () => (await stack.postgres.query<{ version: number }>('SELECT version FROM tenants WHERE tenant_id = $1', [tenantId]))[0]!.version;
      const before = await version();
      let answered = false;
      const pending = stack.admin('POST', path).finally(() => (answered = true));
      const committedAt = await eventually('the change is committed', async () => ((await version()) > before ? Date.now() : undefined), 10_000, 2);
      const answeredBefore = answered;
      await interrupt();
      stack.resume('realtime2');
      timing = `${label} ${Date.now() - committedAt} ms after the commit${answeredBefore ? ', but the call had already answered' : ''}`;
      return { ...(await pending), committed: true };
    },
    timing: () => timing,
  };
}

export interface RevocationFault {
  /** Name for the log line. */
  fault: string;
  op: RevokingOp;
  /** Breaks something just before the admin call. */
  inject(): Promise<void>;
  /**
   * Makes the admin call; the default sends it to the registry and awaits
   * the answer. `committed: true` when the call saw the change committed
   * (PostgreSQL may not be there to ask afterwards).
   */
  call?(path: string): Promise<AdminResult & { committed?: boolean }>;
  /** The fault lasts at least this long from inject() (e.g. past the lease), however quick the answer. */
  minFaultMs?: number;
  /** Runs once the answer (or its failure) is in, before the rule is checked (e.g. lift a held cut). */
  afterAnswer?(): Promise<void>;
  /** Heals the fault (after the rule is checked: a non-2xx is judged while the fault lasts). */
  heal(victim: { t: Tenant; used: string }): Promise<void>;
  /** What a reconnect with `after` must report: recovered (nothing lost), lost (history_lost), or either. */
  history: 'recovered' | 'lost' | 'either';
  /** Live connections of the victim that the fault itself ends (a killed realtime's); they are not expected to close 4401. */
  liveLostTo?: 0 | 1;
}

/**
 * One fault around one revoking admin call, end to end:
 * a victim tenant with a cached token and a live connection on each realtime
 * instance, background traffic of the bystander tenant; inject the fault,
 * call, judge the answer (200: in force at once; otherwise, if committed,
 * nothing accepted once the lease has passed), heal, measure when the change
 * was in force everywhere, check that valid traffic resumed on its own and
 * that reconnects with `after` get every acknowledged message or
 * `recovered: false`, and that repeating the call answers 200 with the
 * change in force. Every phase runs even if an earlier one failed, so the
 * log line always has the figures; the first failure is thrown at the end.
 */
export async function revocationUnderFault(suite: FaultSuite, f: RevocationFault): Promise<void> {
  const { stack, bystander } = suite;
  const { t, used, live } = await suite.victim();
  const traffic = new Traffic(stack, bystander);
  await traffic.start();
  await traffic.warmUp();
  const versionBefore = await committedVersion(stack, t);

  const failures: Error[] = [];
  const phase = async <T>(name: string, fn: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await fn();
    } catch (err) {
      const e = err as Error;
      e.message = `[${name}] ${e.message}`;
      failures.push(e);
      return undefined;
    }
  };

  const injectedAt = Date.now();
  await f.inject();
  const watched = f.liveLostTo === undefined ? live : live.filter((_, i) => i !== f.liveLostTo);
  const watch = watchInForce(stack, t, used, watched);
  const path = opPath(f.op, t.id);
  const r: AdminResult & { committed?: boolean } = f.call ? await f.call(path) : await stack.admin('POST', path);
  if (f.afterAnswer) await f.afterAnswer();
  const rule = await phase('answer', () => expectRevocationHonoured(stack, t, r, used, watched, versionBefore, r.committed));
  if (f.minFaultMs) await sleepUntil(injectedAt + f.minFaultMs);
  await phase('heal', () => f.heal({ t, used }));
  const inForce: InForce = await watch.result();
  await traffic.stop();
  let resumeMs: number | undefined;
  let recovered = '';
  let repeat = '';

  await phase('in force', async () => {
    expect(inForce.ms, 'the change is in force everywhere once the fault is healed').toBeDefined();
    const labels = inForce.closes.map((c, i) => revokedCloseLabel(watched[i]!, c[0]));
    expect(labels.filter((l) => !closedAsRevoked(l)), `live connections closed with 4401 (or 1013 by an instance cut off from the tenant feed): ${labels.join('/')}`).toEqual([]);
  });
  await phase('resume', async () => {
    resumeMs = await expectTrafficResumes(stack, bystander);
  });
  await phase('reconnect', async () => {
    const rec = [await traffic.reconnect(0), await traffic.reconnect(1)];
    const rest = await traffic.restReplay();
    recovered = [...rec.map((x) => (x.recovered ? `ws true(${x.replayed})` : `ws false(${String(x.reason)})`)), rest.recovered === false ? `rest false(${String(rest.reason)})` : `rest ${String(rest.recovered)}(${rest.ids.length})`].join('/');
    if (f.history === 'recovered') expect([...rec.map((x) => x.recovered), rest.recovered], 'nothing was lost, so WS and REST recover').toEqual([true, true, true]);
    if (f.history === 'lost') {
      expect([...rec.map((x) => [x.recovered, x.reason]), [rest.recovered, rest.reason]], 'history was lost, and WS and REST clients are told').toEqual([[false, 'history_lost'], [false, 'history_lost'], [false, 'history_lost']]);
    }
    expect(traffic.subscribersInOrder(), 'subscribers that stayed saw increasing ids only').toBe(true);
  });
  await phase('repeat', async () => {
    const again = await stack.admin('POST', path);
    repeat = `repeat ${again.status} in ${again.ms} ms`;
    expect(again.status, again.text).toBe(200);
    expect(await acceptedNow(stack, t, used), 'after the repeated call, nothing of the tenant is accepted').toEqual([]);
    if (f.op === 'revoke_all') {
      await t.adoptRevokeAll(again);
      await expectTrafficResumes(stack, t);
    }
  });

  report(f.fault, f.op, r, inForce, [rule ?? 'answer check failed', `traffic ${traffic.summary()}`, `resumed in ${resumeMs ?? '-'} ms`, `reconnect ${recovered || '-'}`, repeat].join('; '));
  if (failures.length > 0) {
    const [first, ...rest] = failures;
    if (rest.length > 0) first!.message += `\n(also failed: ${rest.map((e) => e.message.split('\n')[0]).join(' | ')})`;
    throw first!;
  }
}
