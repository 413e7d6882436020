import { describe, expect, it } from 'vitest';
import { signWithJose } from '../support/host';
import type { TestSocket } from '../support/ws-client';
import type { AdminResult } from './support/fault-stack';
import { openSocket, subscribe, wsPublish, type Tenant } from './support/probes';
import { finalChecks, useFaultStack } from './support/suite';

const CLOSE_UNAUTHORIZED = 4401;

/** A live connection on each realtime instance, on a token signed with `secret`, each subscribed. */
async function connectBoth(stack: { realtimeWs: [string, string] }, t: Tenant, secret: string): Promise<TestSocket[]> {
  const token = await signWithJose(secret, t.id, crypto.randomUUID(), 900);
  const out: TestSocket[] = [];
  for (const url of stack.realtimeWs) {
    const s = await openSocket(url, token);
    expect((await subscribe(s, t.topic('rotate'))).type).toBe('subscribed');
    out.push(s);
  }
  return out;
}

/** Close codes of `socks` as seen within `ms` after the 200 was answered (undefined: still open then), and when each was seen (ms after the 200). */
async function closesWithin(socks: TestSocket[], r: AdminResult, ms: number): Promise<{ codes: Array<number | undefined>; at: string[] }> {
  const seen = await Promise.all(
    socks.map(async (s) => {
      const already = s.closeCode !== undefined;
      const code = await s.closed(Math.max(1, r.answeredAt + ms - Date.now())).catch(() => undefined);
      return { code, at: code === undefined ? 'open' : already ? 'by the 200' : `+${Date.now() - r.answeredAt} ms` };
    }),
  );
  return { codes: seen.map((x) => x.code), at: seen.map((x) => x.at) };
}

/** Each still-open socket publishes once; returns which got `published`. */
async function publishes(socks: TestSocket[], t: Tenant): Promise<boolean[]> {
  return Promise.all(socks.map(async (s) => (s.closeCode === undefined ? (await wsPublish(s, t.topic('rotate'), { alive: true }, 3000)).id !== undefined : false)));
}

async function primarySecret(t: Tenant): Promise<string> {
  const res = await t.fetchSecret();
  expect(res.status).toBe(200);
  return ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
}

// A second `rotate` removes the secret that was previous: a removed key
// version is a revocation (docs/CONTRACT.md), so every live connection whose
// token was signed with it is closed 4401 on every instance before the 200,
// and none signed with a secret the tenant keeps. `expire_previous` likewise.
describe('faults: rotate twice, then expire_previous', () => {
  const suite = useFaultStack();

  it('closes the connections of each removed key version (4401) on both realtime instances before the 200, and keeps the others', async () => {
    const { stack } = suite;
    const { t } = await suite.victim();
    const a = t.jwtSecret;
    const onA = await connectBoth(stack, t, a);

    const first = await stack.admin('POST', `/admin/tenants/${t.id}/jwt_secret/rotate`);
    expect(first.status, first.text).toBe(200);
    const b = await primarySecret(t);
    expect(b).not.toBe(a);
    t.secrets.push(b);
    expect(onA.map((s) => s.closeCode), 'the first rotate keeps A as previous: its connections stay').toEqual([undefined, undefined]);
    const onB = await connectBoth(stack, t, b);

    const second = await stack.admin('POST', `/admin/tenants/${t.id}/jwt_secret/rotate`);
    expect(second.status, second.text).toBe(200);
    const c = await primarySecret(t);
    t.secrets.push(c);
    // The close frame leaves before the feed reports the change applied, so before the 200; allow delivery slack.
    const aClose = await closesWithin(onA, second, 1000);
    const bAlive = await publishes(onB, t);
    const onC = await connectBoth(stack, t, c);

    const expire = await stack.admin('POST', `/admin/tenants/${t.id}/jwt_secret/expire_previous`);
    expect(expire.status, expire.text).toBe(200);
    const bClose = await closesWithin(onB, expire, 1000);
    const cAlive = await publishes(onC, t);

    console.log(
      `[faults] rotate twice | second rotate ${second.status} in ${second.ms} ms: A (removed) connections ${aClose.codes.map((x) => x ?? 'open').join('/')} (${aClose.at.join('/')}), B (kept) publishing ${bAlive.join('/')} | ` +
        `expire_previous ${expire.status} in ${expire.ms} ms: B connections ${bClose.codes.map((x) => x ?? 'open').join('/')} (${bClose.at.join('/')}), C publishing ${cAlive.join('/')}`,
    );
    expect(aClose.codes, 'connections on the removed key version closed 4401 on both instances').toEqual([CLOSE_UNAUTHORIZED, CLOSE_UNAUTHORIZED]);
    expect(bAlive, 'connections on the key kept as previous stay and publish').toEqual([true, true]);
    expect(bClose.codes, 'expire_previous closes the previous key version 4401 on both instances').toEqual([CLOSE_UNAUTHORIZED, CLOSE_UNAUTHORIZED]);
    expect(cAlive, 'connections on the primary stay and publish').toEqual([true, true]);
    // A token signed with the removed A is refused everywhere (the upgrade path).
    const aToken = await signWithJose(a, t.id, crypto.randomUUID(), 900);
    for (const url of stack.realtimeWs) {
      await expect(openSocket(url, aToken)).rejects.toMatchObject({ status: 401 });
    }
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
