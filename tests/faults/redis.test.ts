import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { eventually, expectTrafficResumes } from './support/probes';
import { revocationUnderFault } from './support/scenario';
import { finalChecks, useFaultStack } from './support/suite';
import { Traffic } from './support/traffic';

/** Fields of an INFO section as a map. */
function infoFields(text: unknown): Map<string, string> {
  return new Map(String(text).split('\r\n').filter((l) => l.includes(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]));
}

// Redis carries the tenant-event wake-ups, the verifier's key cache, the
// gateway's rate limit and every message. Here it is SIGKILLed and restarted
// (without, then with persistence) and frozen, each time around an admin
// revocation, with a bystander tenant's traffic running throughout.
describe('faults: Redis killed, restarted, frozen', () => {
  const suite = useFaultStack({ redis: { persistent: false } });

  it('Redis SIGKILLed, disable during the outage, restarted empty: the disable holds, traffic resumes, a reconnect is told history_lost', async () => {
    const { stack } = suite;
    await revocationUnderFault(suite, {
      fault: 'redis SIGKILL + restart without persistence',
      op: 'disable',
      inject: () => stack.redis.kill(),
      heal: () => stack.redis.start({ persistent: false }),
      minFaultMs: 3000,
      history: 'lost',
    });
  });

  it('Redis with RDB snapshots only (save 1 1) SIGKILLed under publishing, restarted from its last snapshot: a resuming client gets every acknowledged message or is told history_lost', async () => {
    const { stack, bystander } = suite;
    await stack.redis.kill();
    await stack.redis.start({ persistent: false, rdb: true }, true);
    await expectTrafficResumes(stack, bystander);
    const channel = `rdb-${randomUUID().slice(0, 8)}`;
    const traffic = new Traffic(stack, bystander, channel);
    await traffic.start();
    await traffic.warmUp(20);
    const warmAt = Date.now();
    // Kill once a snapshot holds the stream (so it comes back with its old epoch), writes were acknowledged
    // since, and no snapshot is being written: the file on disk misses them, so the restart loses them for sure.
    const unsaved = await eventually('acknowledged writes after a snapshot that holds the stream', async () => {
      const p = infoFields(await stack.redis.command('INFO', 'persistence'));
      const changes = Number(p.get('rdb_changes_since_last_save'));
      const savedAfterWarmUp = Number(p.get('rdb_last_save_time')) * 1000 > warmAt;
      return savedAfterWarmUp && p.get('rdb_bgsave_in_progress') === '0' && changes >= 20 ? changes : undefined;
    }, 10_000, 5);
    await stack.redis.kill();
    const ackedAtKill = traffic.acked.length;
    await stack.redis.start({ persistent: false, rdb: true });
    await eventually('publishes are acknowledged again', async () => traffic.acked.length >= ackedAtKill + 10, 20_000, 20);
    await traffic.stop();
    const stored = new Set(((await stack.redis.command('XRANGE', `relay:ch:{${bystander.id}:${channel}}`, '-', '+')) as Array<[string]>).map(([id]) => id));
    const lost = traffic.acked.filter((id) => !stored.has(id));
    console.log(`[faults] redis RDB-only: ${lost.length} of ${traffic.acked.length} acknowledged messages are not in the restored stream`);
    // Each resume either says recovered: false (history_lost) or replays every acknowledged message (checked inside).
    const rec = [await traffic.reconnect(0), await traffic.reconnect(1)];
    const rest = await traffic.restReplay();
    console.log(
      `[faults] redis RDB-only SIGKILL + restart | ${unsaved} changes unsaved at the kill; ${traffic.summary()} (${ackedAtKill} before the kill), ` +
        `${lost.length} acknowledged messages not in the restored stream | reconnect ${rec.map((x) => (x.recovered ? `ws true(${x.replayed})` : `ws false(${String(x.reason)})`)).join('/')}/rest ${String(rest.recovered)}${rest.reason ? `(${String(rest.reason)})` : ''}`,
    );
    expect(lost.length, 'the snapshot missed acknowledged messages (else the test shows nothing)').toBeGreaterThan(0);
    expect(stored.size, 'the snapshot held the stream, with its epoch').toBeGreaterThan(0);
    expect([...rec.map((x) => [x.recovered, x.reason]), [rest.recovered, rest.reason]], 'history was lost, and WS and REST clients are told').toEqual([[false, 'history_lost'], [false, 'history_lost'], [false, 'history_lost']]);
    expect(traffic.subscribersInOrder(), 'subscribers that stayed saw increasing ids only').toBe(true);
  });

  it('Redis with AOF (appendfsync always) SIGKILLed, revoke_all during the outage, restarted: the revoke_all holds, every acknowledged message is recovered', async () => {
    const { stack } = suite;
    // Switch the private server to AOF persistence (an empty data set) and let the services come back to it.
    await stack.redis.kill();
    await stack.redis.start({ persistent: true }, true);
    await expectTrafficResumes(stack, suite.bystander);
    await revocationUnderFault(suite, {
      fault: 'redis SIGKILL + restart with AOF',
      op: 'revoke_all',
      inject: () => stack.redis.kill(),
      heal: () => stack.redis.start({ persistent: true }),
      minFaultMs: 3000,
      history: 'recovered',
    });
  });

  it('Redis frozen (SIGSTOP) during a disable, then resumed (SIGCONT): the disable holds, traffic resumes, reconnects get every acknowledged message', async () => {
    const { stack } = suite;
    await revocationUnderFault(suite, {
      fault: 'redis SIGSTOP ... SIGCONT',
      op: 'disable',
      inject: async () => stack.redis.freeze(),
      heal: async () => stack.redis.resume(),
      // Frozen past the lease: the services must neither hang for good nor acknowledge what they cannot store.
      minFaultMs: 4000,
      // Nothing is lost while a server is stopped; "either" would hide an unneeded history_lost.
      history: 'recovered',
    });
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
