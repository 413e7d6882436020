import { describe, expect, it } from 'vitest';
import { closeSockets, committedVersion, eventually, expectRevocationHonoured, expectTrafficResumes, gatewayMe, watchInForce } from './support/probes';
import { Traffic } from './support/traffic';
import { interruptAfterCommit, revocationUnderFault } from './support/scenario';
import { finalChecks, report, useFaultStack } from './support/suite';

// The registry's PostgreSQL is stopped (fast shutdown) and started again.
describe('faults: PostgreSQL stopped and started', () => {
  const suite = useFaultStack();

  it('while PostgreSQL is down every admin call answers 503 unavailable (never 500) and changes nothing; after it starts, traffic resumes and a disable is in force at its 200', async () => {
    const { stack, bystander } = suite;
    const { t, used, live } = await suite.victim();
    const traffic = new Traffic(stack, bystander);
    await traffic.start();
    await traffic.warmUp();
    const versionBefore = await committedVersion(stack, t);

    await stack.postgres.stop();
    const downAt = Date.now();
    const calls = {
      disable: await stack.admin('POST', `/admin/tenants/${t.id}/disable`),
      revoke_all: await stack.admin('POST', `/admin/tenants/${t.id}/jwt_secret/revoke_all`),
      create: await stack.admin('POST', '/admin/tenants'),
      get: await stack.admin('GET', `/admin/tenants/${t.id}`),
      list: await stack.admin('GET', '/admin/tenants'),
    };
    // What a valid token of another tenant gets once the lease has passed with PostgreSQL down (reported, not asserted).
    await new Promise((r) => setTimeout(r, Math.max(0, downAt + stack.leaseMs + 300 - Date.now())));
    const bystanderDuringOutage = await gatewayMe(stack, await bystander.token());
    await stack.postgres.start();
    const upAt = Date.now();

    const resumeMs = await expectTrafficResumes(stack, bystander);
    await traffic.stop();
    const adminBackMs = await eventually('admin API answers again', async () => ((await stack.admin('GET', `/admin/tenants/${t.id}`)).status === 200 ? Date.now() - upAt : undefined));
    expect(await committedVersion(stack, t), 'nothing was committed while PostgreSQL was down').toBe(versionBefore);

    const watch = watchInForce(stack, t, used, live);
    const r = await stack.admin('POST', `/admin/tenants/${t.id}/disable`);
    const rule = await expectRevocationHonoured(stack, t, r, used, live, versionBefore);
    const inForce = await watch.result();
    const rec = [await traffic.reconnect(0), await traffic.reconnect(1)];
    const rest = await traffic.restReplay();
    closeSockets();

    const statuses = Object.entries(calls).map(([k, v]) => `${k} ${v.status} ${v.text}`).join(', ');
    report('postgres stopped ... started', 'disable after restart', r, inForce, `${rule}; during outage: ${statuses}; bystander /me ${bystanderDuringOutage}; traffic ${traffic.summary()}; resumed ${resumeMs} ms, admin back ${adminBackMs} ms after start; reconnect ws ${rec.map((x) => String(x.recovered)).join('/')} rest ${String(rest.recovered)}`);

    for (const [name, c] of Object.entries(calls)) {
      expect([name, c.status, c.body], `${name} while PostgreSQL is down`).toEqual([name, 503, { errors: ['unavailable'] }]);
    }
    expect(r.status, r.text).toBe(200);
    expect(inForce.ms).toBeDefined();
    expect([...rec.map((x) => x.recovered), rest.recovered]).toEqual([true, true, true]);
  });

  it('PostgreSQL stopped after a revoke_all committed, before it was confirmed: never a 500; once the lease has passed nothing of the tenant is accepted; after PostgreSQL starts the change is in force everywhere', async () => {
    const { stack } = suite;
    const midCall = interruptAfterCommit(stack, () => stack.postgres.stop(), 'PostgreSQL down');
    await revocationUnderFault(suite, {
      fault: 'postgres stopped between commit and confirmation',
      op: 'revoke_all',
      // realtime2 is stalled for the call, so the registry is still waiting for confirmations when PostgreSQL goes.
      inject: midCall.inject,
      call: midCall.call,
      heal: () => stack.postgres.start(),
      history: 'recovered',
    });
    console.log(`[faults] postgres stop mid-propagation: ${midCall.timing()}`);
    expect(midCall.timing()).not.toMatch(/already answered/);
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
