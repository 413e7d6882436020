import { describe, expect, it } from 'vitest';
import { busClientsOf, cutBus, holdBusCut } from './support/bus-cut';
import { revocationUnderFault } from './support/scenario';
import { finalChecks, useFaultStack } from './support/suite';

// The registry's tenant-event bus connections (`relay:events-pub` and
// `relay:events-sub` of the registry process, told apart from the other
// services' by their local ports) are cut with CLIENT KILL on the private
// Redis: once just before `disable`, and held cut (killed again as soon as
// they reconnect) for the whole of a `revoke_all` call. The wake-up is lost;
// the tenant feed must still carry the change.
describe('faults: the registry loses its bus connection', () => {
  const suite = useFaultStack();

  it('bus connection cut just before disable: the disable holds and reaches every instance', async () => {
    const { stack } = suite;
    expect((await busClientsOf(stack, 'registry')).length, 'the registry has bus connections to cut').toBeGreaterThan(0);
    let cut = 0;
    await revocationUnderFault(suite, {
      fault: 'registry bus cut (CLIENT KILL) before the call',
      op: 'disable',
      inject: async () => {
        cut = await cutBus(stack, 'registry');
        expect(cut).toBeGreaterThan(0);
      },
      heal: async () => {},
      history: 'recovered',
    });
  });

  it('bus connection held cut for the whole revoke_all call: the revoke_all holds and reaches every instance', async () => {
    const { stack } = suite;
    let hold: { stop(): Promise<number> } | undefined;
    let cuts = 0;
    await revocationUnderFault(suite, {
      fault: 'registry bus held cut during the call',
      op: 'revoke_all',
      inject: async () => {
        expect(await cutBus(stack, 'registry')).toBeGreaterThan(0);
        hold = holdBusCut(stack, 'registry', 10_000);
      },
      afterAnswer: async () => {
        cuts = await hold!.stop();
      },
      heal: async () => {},
      history: 'recovered',
    });
    console.log(`[faults] registry bus held cut: ${cuts} reconnections cut during the call`);
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
