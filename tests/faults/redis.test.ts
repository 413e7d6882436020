import { describe, it } from 'vitest';
import { expectTrafficResumes } from './support/probes';
import { revocationUnderFault } from './support/scenario';
import { finalChecks, useFaultStack } from './support/suite';

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
