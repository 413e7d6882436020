import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, expectRevocationHonoured, expectTrafficResumes, committedVersion } from '../faults/support/probes';
import { opPath } from '../faults/support/scenario';
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

/** The Redis time in a message id (`<ms>-<seq>`): when the master that stored it did. */
const idMs = (id: string) => Number(id.split('-')[0]);

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
    expect(resumeMs, 'traffic resumed within the documented bound').toBeLessThanOrEqual(RESUME_BOUND_MS);
    expect(recovered, 'every acknowledged message replayed on both instances and over REST').toEqual([true, true, true]);
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
