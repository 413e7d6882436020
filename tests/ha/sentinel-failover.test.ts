import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, expectRevocationHonoured, expectTrafficResumes, committedVersion, openSocket, wsPublish } from '../faults/support/probes';
import { opPath, revocationUnderFault } from '../faults/support/scenario';
import type { FaultStack } from '../faults/support/fault-stack';
import { finalChecks, useFaultStack } from '../faults/support/suite';
import { Traffic } from '../faults/support/traffic';
import { DOWN_AFTER_MS, PrivateSentinelGroup } from './support/redis-sentinel';

/**
 * The documented bound (docs/OPERATIONS.md "Redis high availability"): from
 * the master's death until publishes are acknowledged again takes at most
 * down-after-milliseconds + 4 s (the sentinels' vote and the promotion, about
 * 1-2 s, then the clients' reconnect backoff, at most 2 s); 1 s of margin for
 * a loaded test machine.
 */
const RESUME_BOUND_MS = DOWN_AFTER_MS + 4000 + 1000;
/**
 * What realtime itself owns: from the promotion until it acknowledges a
 * publish on the new master (at most one 2 s reconnect step, 1 s margin).
 * The sentinels' vote is theirs: a vote that elects no leader is retried
 * later (seen once in a fresh-clone run: promoted 14.7 s after the kill,
 * both instances back 1.7 s after the promotion). The documented bound is
 * judged when the vote succeeded at once (promoted within down-after + 2 s).
 */
const AFTER_PROMOTION_BOUND_MS = 3000;
const FIRST_VOTE_MS = DOWN_AFTER_MS + 2000;

/** The Redis time in a message id (`<ms>-<seq>`): when the master that stored it did. */
const idMs = (id: string) => Number(id.split('-')[0]);

/** How long after `killedAt` each realtime instance acknowledged a WebSocket publish again (one fresh connection per try, bounded). */
async function perInstanceResume(stack: FaultStack, token: string, topic: string, killedAt: number, boundMs: number): Promise<Array<number | undefined>> {
  return Promise.all(stack.realtimeWs.map(async (url) => {
    const deadline = killedAt + boundMs + 30_000;
    for (let i = 0; i < 400 && Date.now() < deadline; i++) {
      try {
        const s = await openSocket(url, token);
        try {
          for (let j = 0; j < 100 && Date.now() < deadline; j++) {
            const r = await wsPublish(s, topic, { probe: j }, 1000);
            if (r.id && idMs(r.id) > killedAt) return Date.now() - killedAt;
            await new Promise((res) => setTimeout(res, 50));
          }
        } finally {
          s.close();
        }
      } catch {
        await new Promise((res) => setTimeout(res, 100));
      }
    }
    return undefined;
  }));
}

// Every service of the distributed deployment (registry, two verifiers, two
// realtime instances, the gateway; tests/faults's stack) on a Sentinel group
// (master, replica, three sentinels, quorum 2) through a redis-sentinel://
// URL. The master is SIGKILLed under steady WebSocket and REST traffic.
describe('Redis Sentinel: the master SIGKILLed under traffic', () => {
  let group: PrivateSentinelGroup | undefined;
  // Registered before the stack's hooks: started first, stopped last.
  beforeAll(async () => {
    group = await PrivateSentinelGroup.start();
  });
  afterAll(async () => {
    await group?.stop();
  });
  const suite = useFaultStack({ redisUrl: () => group!.url });

  it('the replica is promoted, traffic resumes on its own within the bound, every acknowledged message is delivered or reported recovered: false, and a tenant disabled after the failover is refused at once', async () => {
    const { stack } = suite;
    const { t, used, live } = await suite.victim();
    const traffic = new Traffic(stack, suite.bystander);
    await traffic.start();
    await traffic.warmUp(10);
    const old = await group!.master();
    const killedAt = Date.now();
    await old.proc.stop('SIGKILL');
    const before = traffic.acked.length;

    const promoted = await eventually('the sentinels promote the replica', async () => {
      const addr = await group!.masterAddr();
      return addr !== undefined && addr !== `127.0.0.1:${old.port}` ? addr : undefined;
    }, 30_000, 50);
    const failoverMs = Date.now() - killedAt;
    // Resumed: a publish stored (its id made by the new master's clock) after the kill is acknowledged.
    const firstAfter = await eventually('a publish is acknowledged after the failover', async () => traffic.acked.find((id) => idMs(id) > killedAt), 30_000, 20);
    const resumeMs = idMs(firstAfter) - killedAt;
    const ackedAtResume = traffic.acked.length;
    await eventually('steady traffic on the new master', async () => traffic.acked.length >= ackedAtResume + 10, 20_000, 20);

    // After the failover: a disable answered 200 is in force at once.
    const versionBefore = await committedVersion(stack, t);
    const r = await stack.admin('POST', opPath('disable', t.id));
    expect(r.status, r.text).toBe(200);
    const rule = await expectRevocationHonoured(stack, t, r, used, live, versionBefore);

    await traffic.stop();
    const endToEndMs = await expectTrafficResumes(stack, suite.bystander);
    const rec = [await traffic.reconnect(0), await traffic.reconnect(1)];
    const rest = await traffic.restReplay();
    expect(traffic.subscribersInOrder(), 'subscribers that stayed saw increasing ids only').toBe(true);
    // With WAIT for the replica on every publish, nothing acknowledged before the kill was lost: the honest
    // `recovered: false` is allowed by the guarantee, but it would mean an acknowledged write did not reach the replica.
    const recovered = [...rec.map((x) => x.recovered), rest.recovered];

    console.log(
      `[ha] sentinel failover: promoted ${promoted} ${failoverMs} ms after the SIGKILL (down-after ${DOWN_AFTER_MS} ms); ` +
        `first publish acknowledged on the new master ${resumeMs} ms after the kill (bound ${RESUME_BOUND_MS} ms); ` +
        `traffic ${traffic.summary()} (${before} before the kill); ` +
        `reconnects: ${rec.map((x, i) => `realtime${i + 1} ${x.recovered ? `recovered ${x.replayed}/${traffic.acked.length}` : `recovered: false (${String(x.reason)})`}`).join(', ')}, ` +
        `REST ${rest.recovered === false ? `recovered: false (${String(rest.reason)})` : `${rest.ids.length} ids`}; ` +
        `disable after the failover: admin 200 in ${r.ms} ms, ${rule}; end-to-end check ${endToEndMs} ms`,
    );
    expect(resumeMs - failoverMs, `traffic resumed within ${AFTER_PROMOTION_BOUND_MS} ms of the promotion`).toBeLessThanOrEqual(AFTER_PROMOTION_BOUND_MS);
    if (failoverMs <= FIRST_VOTE_MS) expect(resumeMs, 'traffic resumed within the documented bound').toBeLessThanOrEqual(RESUME_BOUND_MS);
    expect(recovered, 'every acknowledged message replayed on both instances and over REST').toEqual([true, true, true]);
  });

  // Two more failovers in a row, each with the old master back as a replica first and a disable sent
  // while the sentinels vote: every realtime instance must be back on the new master within the bound.
  for (const n of [2, 3]) {
    it(`failover ${n}: the old master rejoins as a replica, the new master is SIGKILLed, a disable sent during the vote holds, each realtime instance is back on the new master within the bound, every acknowledged message is recovered`, async () => {
      const { stack } = suite;
      const gone = group!.data.find((d) => !d.proc.running);
      expect(gone, 'the previous test left the old master down').toBeDefined();
      await group!.rejoin(gone!);
      const current = await group!.master();
      // Realtime tells a promoted replica from a restarted master by its start time: it must have run
      // for 2 s before the master last vouched for the history (a heartbeat every 5 s). A replica
      // promoted sooner makes every channel start a new epoch (recovered: false, honest but not the
      // case under test), so wait for the marker to be vouched for 2 s after the rejoin.
      const rejoinedAt = Date.now();
      await eventually('the master vouches for the history after the rejoin', async () => (await group!.hget(current.port, 'relay:{history}:generation', 'seen')) > rejoinedAt + 2000 || undefined, 15_000, 100);
      const probeToken = await suite.bystander.token();
      const probeTopic = suite.bystander.topic(`probe-${n}`);
      let killedAt = 0;
      let promotion: Promise<number> | undefined;
      let resumed: Promise<Array<number | undefined>> | undefined;
      await revocationUnderFault(suite, {
        fault: `sentinel failover ${n}: master SIGKILL, replica promoted`,
        op: 'disable',
        // The admin call goes out right after the kill: it is judged while the sentinels are still voting.
        inject: async () => {
          killedAt = Date.now();
          await current.proc.stop('SIGKILL');
          promotion = eventually('the sentinels promote the replica', async () => {
            const addr = await group!.masterAddr();
            return addr !== undefined && addr !== `127.0.0.1:${current.port}` ? Date.now() - killedAt : undefined;
          }, 30_000, 50);
          promotion.catch(() => {});
          resumed = perInstanceResume(stack, probeToken, probeTopic, killedAt, RESUME_BOUND_MS);
        },
        heal: async () => {
          await promotion;
        },
        history: 'recovered',
      });
      const failoverMs = (await promotion)!;
      const perInstance = await resumed!;
      console.log(`[ha] sentinel failover ${n}: promoted ${failoverMs} ms after the SIGKILL; first publish acknowledged again on realtime1 ${String(perInstance[0])} ms, realtime2 ${String(perInstance[1])} ms after it (bound ${RESUME_BOUND_MS} ms)`);
      expect(perInstance.map((ms) => ms !== undefined && ms - failoverMs <= AFTER_PROMOTION_BOUND_MS), `each realtime instance publishes on the new master within ${AFTER_PROMOTION_BOUND_MS} ms of the promotion (${failoverMs} ms): ${JSON.stringify(perInstance)}`).toEqual([true, true]);
      if (failoverMs <= FIRST_VOTE_MS) {
        expect(perInstance.map((ms) => ms !== undefined && ms <= RESUME_BOUND_MS), `each realtime instance publishes on the new master within ${RESUME_BOUND_MS} ms: ${JSON.stringify(perInstance)}`).toEqual([true, true]);
      }
      expect(stack.crashed()).toEqual([]);
    });
  }

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
