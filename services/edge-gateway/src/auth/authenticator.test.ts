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
  const verifier: VerifierClient = {
    verify: () => new Promise<VerifyResult>((resolve) => waiting.push(resolve)),
    ready: async () => true,
    close: () => {},
  };
  return { verifier, waiting };
}

describe('Authenticator', () => {
  const setup = () => {
    const { verifier, waiting } = manualVerifier();
    const bus = new ManualTenantFeed();
    const cache = new VerificationCache({ ttlMs: 30_000, maxEntries: 100, clock: new ManualClock() });
    const auth = new Authenticator({ verifier, cache, feed: bus, logger: createLogger({ service: 't', level: 'silent' }) });
    return { auth, bus, cache, waiting };
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

  it('does not join or cache a check that started before a tenant event', async () => {
    const { auth, bus, cache, waiting } = setup();
    const identity = fakeIdentity();
    const early = auth.check('t');
    await bus.push({ tenant_id: identity.tenantId, kind: 'disabled', version: 2, revoked_key_versions: [] });
    const late = auth.check('t');
    expect(waiting).toHaveLength(2);
    waiting[0]!({ valid: true, identity });
    waiting[1]!({ valid: false, reason: 'tenant_disabled' });
    expect((await early).valid).toBe(true);
    expect((await late).valid).toBe(false);
    expect(cache.size).toBe(0);
  });
});
