import { describe, expect, it } from 'vitest';
import { acceptedNow } from './support/probes';
import { interruptAfterCommit, revocationUnderFault } from './support/scenario';
import { finalChecks, useFaultStack } from './support/suite';

// SIGKILL of one process at a time: the registry between committing a
// disable and answering it, verifier2 (realtime2's verifier) before a
// disable, realtime2 (with live connections) before a disable.
describe('faults: a service process is SIGKILLed', () => {
  const suite = useFaultStack();

  it('registry SIGKILLed after the disable committed, before it answered: once the lease has passed nothing of the tenant is accepted; after a restart the disable is in force everywhere', async () => {
    const { stack } = suite;
    // realtime2 is stalled (SIGSTOP) for the call, so the registry cannot
    // confirm the change at once and is still waiting when it is killed.
    const midCall = interruptAfterCommit(stack, () => stack.kill('registry'), 'registry killed');
    await revocationUnderFault(suite, {
      fault: 'registry SIGKILL between commit and answer',
      op: 'disable',
      inject: midCall.inject,
      call: midCall.call,
      heal: () => stack.restart('registry'),
      history: 'recovered',
    });
    console.log(`[faults] registry SIGKILL: ${midCall.timing()}`);
    expect(midCall.timing()).not.toMatch(/already answered/);
  });

  it('verifier2 SIGKILLed before a disable: the disable holds, and the restarted verifier2 does not accept the tenant from any cache', async () => {
    const { stack } = suite;
    await revocationUnderFault(suite, {
      fault: 'verifier2 SIGKILL',
      op: 'disable',
      inject: () => stack.kill('verifier2'),
      heal: async ({ t, used }) => {
        await stack.restart('verifier2');
        // The moment it is up again: its Redis key cache and whatever it knew before must not let the tenant in.
        expect(await acceptedNow(stack, t, used), 'nothing of the tenant is accepted right after verifier2 restarts').toEqual([]);
      },
      history: 'recovered',
    });
  });

  it('realtime2 SIGKILLed with live connections before a disable: the disable holds, realtime2 comes back refusing the tenant, reconnects to it recover every acknowledged message', async () => {
    const { stack } = suite;
    await revocationUnderFault(suite, {
      fault: 'realtime2 SIGKILL',
      op: 'disable',
      inject: () => stack.kill('realtime2'),
      heal: () => stack.restart('realtime2'),
      history: 'recovered',
      liveLostTo: 1,
    });
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
