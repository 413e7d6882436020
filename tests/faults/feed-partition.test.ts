import { describe, expect, it } from 'vitest';
import { TestSocket } from '../support/ws-client';
import { eventually, expectTrafficResumes, openSocket, subscribe, upgradeStatus, wsPublish } from './support/probes';
import { finalChecks, useFaultStack } from './support/suite';

/** WebSocket close code of an instance that cannot vouch for its connections (docs/PROTOCOL.md "Close codes"). */
const CLOSE_TRY_AGAIN_LATER = 1013;
/** How long the publisher keeps going after the 200 (the cut lasts at least this long). */
const PUBLISH_AFTER_MS = 3000;

async function readyz(url: string): Promise<{ status: number; checks: Record<string, boolean> }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    const body = (await res.json()) as { checks?: Record<string, boolean> };
    return { status: res.status, checks: body.checks ?? {} };
  } catch {
    return { status: 0, checks: {} };
  }
}

// realtime1 reaches the registry's gRPC port (tenant feed, channel rules)
// through a proxy of its own; the test switches that proxy to a blackhole
// (accepts, forwards nothing, answers nothing) while Redis, the verifiers and
// clients still reach realtime1. The registry waits out realtime1's lease and
// answers `revoke_all` 200: from then on realtime1 can prove nothing about its
// connections, so it must deliver nothing to them, accept nothing from them,
// close them (1013) and report not ready until the cut heals.
describe('faults: a realtime instance cut off from the registry (tenant feed blackholed)', () => {
  const suite = useFaultStack({ feedProxyFor: ['realtime1'] });

  it('revoke_all 200 while cut off: the cut-off instance delivers nothing to and accepts nothing from its connections, closes them 1013, and is not ready until the cut heals', async () => {
    const { stack } = suite;
    const proxy = stack.feedProxies.realtime1!;
    const rt1Ready = stack.readyUrl('realtime1');
    expect((await readyz(rt1Ready)).status, 'realtime1 is ready before the cut').toBe(200);

    const { t, used } = await suite.victim();
    const channel = 'cut';
    const topic = t.topic(channel);
    // Three live connections of the victim on the instance that will be cut off, subscribed.
    const cutOff: TestSocket[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await openSocket(stack.realtimeWs[0], used);
      expect((await subscribe(s, topic)).type).toBe('subscribed');
      cutOff.push(s);
    }

    const closedAt = cutOff.map(() => 0);
    cutOff.forEach((s, i) => s.ws.once('close', () => (closedAt[i] = Date.now())));
    const cutAt = Date.now();
    proxy.blackhole();
    const r = await stack.admin('POST', `/admin/tenants/${t.id}/jwt_secret/revoke_all`);
    expect(r.status, r.text).toBe(200);
    await t.adoptRevokeAll(r);

    // The tenant's host publishes with its new secret, on the other instance, for a while after the 200.
    const publisher = await openSocket(stack.realtimeWs[1], await t.token());
    const afterIds = new Set<string>();
    const revokedAcks: string[] = [];
    const deadline = Date.now() + PUBLISH_AFTER_MS;
    const publishing = (async () => {
      for (let i = 0; i < 1000 && Date.now() < deadline; i++) {
        const p = await wsPublish(publisher, topic, { n: i }, 3000);
        if (p.id) afterIds.add(p.id);
        await new Promise((res) => setTimeout(res, 10));
      }
    })();
    // Meanwhile the revoked connections try to publish too (each waits for its answer); none may be acknowledged.
    const attempts = cutOff.map(async (s, k) => {
      for (let i = 0; i < 100 && Date.now() < deadline && s.closeCode === undefined; i++) {
        const q = await wsPublish(s, topic, { revoked: k, i }, 2500);
        if (q.id) revokedAcks.push(q.id);
      }
    });
    await Promise.all([publishing, ...attempts]);
    const ready = await readyz(rt1Ready);
    const upgrade = await upgradeStatus(stack.realtimeWs[0], await t.token());
    const stillCut = proxy.blackholed;

    const delivered = cutOff.map((s) => s.frames.filter((f) => f.type === 'message' && afterIds.has(f.id as string)).length);
    const codes = cutOff.map((s) => s.closeCode);
    console.log(
      `[faults] realtime1 feed blackholed | revoke_all: admin ${r.status} in ${r.ms} ms (${r.answeredAt - cutAt} ms after the cut) | ` +
        `${afterIds.size} published after the 200; delivered to the cut-off sockets: ${delivered.join('/')}; revoked publishes acknowledged: ${revokedAcks.length}; ` +
        `close codes ${codes.map((c) => c ?? 'open').join('/')} at ${closedAt.map((at) => (at === 0 ? '-' : `${at - r.answeredAt} ms`)).join('/')} from the 200; realtime1 /readyz ${ready.status} ${JSON.stringify(ready.checks)}; fresh upgrade on realtime1: ${upgrade}`,
    );
    expect(stillCut, 'the cut lasted the whole check').toBe(true);
    expect(afterIds.size, 'the host published after the 200').toBeGreaterThan(10);
    expect(delivered, 'no message published after the 200 reached a revoked socket of the cut-off instance').toEqual(cutOff.map(() => 0));
    expect(revokedAcks, 'no publish from a revoked socket was acknowledged').toEqual([]);
    expect(codes, 'the cut-off instance closed its connections with 1013').toEqual(cutOff.map(() => CLOSE_TRY_AGAIN_LATER));
    expect(ready.status, 'the cut-off instance reports not ready').toBe(503);
    expect(ready.checks.tenant_feed, '/readyz names the tenant feed').toBe(false);
    expect(upgrade, 'the cut-off instance takes no new connection').not.toBe(101);

    // The cut heals: realtime1 is current and ready again, and serves the tenant with its new secret.
    const healedAt = Date.now();
    proxy.heal();
    await eventually('realtime1 is ready again after the heal', async () => (await readyz(rt1Ready)).status === 200, 20_000, 100);
    const readyAfterMs = Date.now() - healedAt;
    const resumeMs = await expectTrafficResumes(stack, t);
    console.log(`[faults] realtime1 feed healed: ready again after ${readyAfterMs} ms; the tenant's traffic resumed in ${resumeMs} ms`);
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
