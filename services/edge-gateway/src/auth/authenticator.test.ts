import { createLogger, ManualClock } from '@service-relay/core';
import { ManualTenantFeed } from '@service-relay/tenant-events';
import { fakeIdentity } from '@service-relay/testkit';
import type { VerifierClient, VerifyResult } from '@service-relay/verifier-client';
import { describe, expect, it } from 'vitest';
import { Authenticator } from './authenticator';
import { VerificationCache } from './verification-cache';

/** A verifier whose answers the test releases by hand. */
function manualVerifier() {
  const waiting: Array<(r: VerifyResult) => void> = [];
  const minSeqs: Array<number | undefined> = [];
  const verifier: VerifierClient = {
    verify: (_token, _kind, minSeq) => {
      minSeqs.push(minSeq);
      return new Promise<VerifyResult>((resolve) => waiting.push(resolve));
    },
    ready: async () => true,
    close: () => {},
  };
  return { verifier, waiting, minSeqs };
}

describe('Authenticator', () => {
  const setup = () => {
    const { verifier, waiting, minSeqs } = manualVerifier();
    const bus = new ManualTenantFeed();
    const cache = new VerificationCache({ ttlMs: 30_000, maxEntries: 100, clock: new ManualClock() });
    const auth = new Authenticator({ verifier, cache, feed: bus, logger: createLogger({ service: 't', level: 'silent' }) });
    return { auth, bus, cache, waiting, minSeqs };
  };

  it('makes one verifier call for a burst of the same token', async () => {
    const { auth, waiting } = setup();
    const identity = fakeIdentity();
    const all = Promise.all([auth.check('t'), auth.check('t'), auth.check('t')]);
    expect(waiting).toHaveLength(1);
    waiting[0]!({ valid: true, identity });
    expect((await all).every((r) => r.valid)).toBe(true);
    expect((await auth.check('t')).valid).toBe(true);
    expect(waiting).toHaveLength(1);
  });

  it('does not join or cache a check that started before a tenant event, and asks again when its verdict predates it', async () => {
    const { auth, bus, cache, waiting, minSeqs } = setup();
    const identity = fakeIdentity();
    const early = auth.check('t');
    await bus.push({ tenant_id: identity.tenantId, kind: 'disabled', version: 2, revoked_key_versions: [] });
    const late = auth.check('t');
    expect(waiting).toHaveLength(2);
    // Judged before the disable (seq 1) this gateway applied: not used, asked again with min_seq.
    waiting[0]!({ valid: true, identity: { ...identity, asOfSeq: 0 } });
    waiting[1]!({ valid: false, reason: 'tenant_disabled' });
    expect((await late).valid).toBe(false);
    await expect.poll(() => waiting.length).toBe(3);
    expect(minSeqs).toEqual([undefined, undefined, 1]);
    waiting[2]!({ valid: false, reason: 'tenant_disabled' });
    expect((await early).valid).toBe(false);
    expect(cache.size).toBe(0);
  });

  it('caches a verdict only when it reflects every change of its tenant applied here', async () => {
    const { auth, bus, cache, waiting } = setup();
    const identity = fakeIdentity();
    await bus.push({ tenant_id: identity.tenantId, kind: 'rotated', version: 2, revoked_key_versions: [] });
    const first = auth.check('t');
    waiting[0]!({ valid: true, identity: { ...identity, asOfSeq: 1 } });
    expect((await first).valid).toBe(true);
    expect(cache.size).toBe(1);
    expect(waiting).toHaveLength(1);
  });
});
