import { describe, expect, it } from 'vitest';
import { decideAfterClose, type CloseFacts } from './close-policy.js';

const ready = (code: number, more: Partial<CloseFacts> = {}): CloseFacts => ({ code, wasReady: true, refusalStatus: undefined, authRefusals: 0, blindFailuresAfterAuth: 0, policyCloses: 0, ...more });
const refused = (status: number | undefined, more: Partial<CloseFacts> = {}): CloseFacts => ({ ...ready(1006), wasReady: false, refusalStatus: status, ...more });
const RECONNECT = { action: 'reconnect', freshToken: true, immediate: false };

// docs/PROTOCOL.md "Close codes" and "Connecting", one row each.
describe('decideAfterClose', () => {
  it.each([
    ['4401 token expired or revoked: fresh token, reconnect', ready(4401), RECONNECT],
    ['1001 going away: reconnect at once', ready(1001), { ...RECONNECT, immediate: true }],
    ['1012 service restart (a proxy in front may send it): reconnect at once', ready(1012), { ...RECONNECT, immediate: true }],
    ['1006 dropped', ready(1006), RECONNECT],
    ['1009 frame too large', ready(1009), RECONNECT],
    ['1011 server error', ready(1011), RECONNECT],
    ['1013 try again later', ready(1013), RECONNECT],
    ['a server 1000', ready(1000), RECONNECT],
    ['an unknown code', ready(4999), RECONNECT],
    ['4429 too many connections for the tenant', ready(4429), RECONNECT],
    ['4409 disconnected by the host: never', ready(4409), { action: 'give_up', code: 'disconnected' }],
    ['1002 protocol error', ready(1002), { action: 'give_up', code: 'disconnected' }],
    ['1007 invalid UTF-8', ready(1007), { action: 'give_up', code: 'disconnected' }],
    ['1008 once: refresh and reconnect', ready(1008), RECONNECT],
    ['1008 twice in a row: give up', ready(1008, { policyCloses: 1 }), { action: 'give_up', code: 'disconnected' }],
    ['upgrade 401, first time: refresh the token and try again', refused(401), RECONNECT],
    ['upgrade 401 after a 4401 or a 401: give up', refused(401, { authRefusals: 1 }), { action: 'give_up', code: 'invalid_or_missing_token' }],
    ['upgrade 503 (auth_unavailable, unavailable)', refused(503), RECONNECT],
    ['upgrade 502 / 504 through the gateway', refused(502), RECONNECT],
    ['upgrade 500', refused(500), RECONNECT],
    ['upgrade 404: wrong URL', refused(404), { action: 'give_up', code: 'not_found' }],
    ['upgrade 426', refused(426), { action: 'give_up', code: 'upgrade_required' }],
    ['upgrade 431', refused(431), { action: 'give_up', code: 'headers_too_large' }],
    ['upgrade 400', refused(400), { action: 'give_up', code: 'bad_request' }],
    ['a network failure (no status)', refused(undefined), RECONNECT],
    ['no status after a 4401, below the limit', refused(undefined, { authRefusals: 1, blindFailuresAfterAuth: 1 }), RECONNECT],
    ['no status after a 4401, the third in a row (a browser cannot see the 401)', refused(undefined, { authRefusals: 1, blindFailuresAfterAuth: 2 }), { action: 'give_up', code: 'invalid_or_missing_token' }],
    ['4429 before ready, even after a 4401: judged by its code, not as a refused token', { ...refused(undefined, { authRefusals: 1, blindFailuresAfterAuth: 2 }), code: 4429 }, RECONNECT],
    ['4409 before ready', { ...refused(undefined), code: 4409 }, { action: 'give_up', code: 'disconnected' }],
  ])('%s', (_name, facts, decision) => {
    expect(decideAfterClose(facts)).toEqual(decision);
  });
});
