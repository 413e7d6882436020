import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { TestSocket } from '../../support/ws-client';
import { FaultStack, type FaultStackOptions } from './fault-stack';
import { adminLabel, closeSockets, describeInForce, expectNoCrash, expectNoSecretsInLogs, gatewayMe, openSocket, Tenant, type InForce } from './probes';
import type { AdminResult } from './fault-stack';
import { stopTraffic } from './traffic';

export interface FaultSuite {
  readonly stack: FaultStack;
  /** A tenant no fault test revokes: its traffic must resume after every fault. */
  readonly bystander: Tenant;
  /** Every tenant created, for the log check. */
  readonly tenants: Tenant[];
  /** A fresh tenant to revoke, with a token the gateway has cached and a live connection on each realtime instance. */
  victim(): Promise<{ t: Tenant; used: string; live: TestSocket[] }>;
}

/**
 * One stack for the whole file: started before the first test, put back
 * after each (services restarted, backends up and resumed, sockets and
 * background traffic stopped), stopped after the last. A crash is reported
 * by the test during which it happened.
 */
export function useFaultStack(opts: FaultStackOptions = {}): FaultSuite {
  let stack: FaultStack | undefined;
  let bystander: Tenant | undefined;
  const tenants: Tenant[] = [];
  beforeAll(async () => {
    stack = await FaultStack.start(opts);
    bystander = await Tenant.create(stack);
    tenants.push(bystander);
  });
  afterEach(async () => {
    await stopTraffic();
    closeSockets();
    if (!stack) return;
    const crashed = stack.crashed();
    await stack.restore();
    expect(crashed.map((c) => `${c.name} exited ${String(c.code)}\n${c.tail}`), 'a process crashed').toEqual([]);
  });
  afterAll(async () => {
    await stopTraffic();
    closeSockets();
    await stack?.stop();
  });
  return {
    get stack() {
      return stack!;
    },
    get bystander() {
      return bystander!;
    },
    tenants,
    async victim() {
      const t = await Tenant.create(stack!);
      tenants.push(t);
      const used = await t.token();
      expect(await gatewayMe(stack!, used)).toBe(200);
      const live = [await openSocket(stack!.realtimeWs[0], used), await openSocket(stack!.realtimeWs[1], used)];
      return { t, used, live };
    },
  };
}

/** The last test of every file: nobody crashed, no secret or token in any process's output. */
export function finalChecks(suite: FaultSuite): void {
  expectNoCrash(suite.stack);
  expectNoSecretsInLogs(suite.stack, suite.tenants);
}

/** One compact line per fault for the closing note. */
export function report(fault: string, op: string, r: AdminResult, inForce: InForce | undefined, extra = ''): void {
  console.log(`[faults] ${fault} | ${op}: admin ${adminLabel(r)} | ${inForce ? describeInForce(inForce) : 'in force: n/a'}${extra ? ` | ${extra}` : ''}`);
}
