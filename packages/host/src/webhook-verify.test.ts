import { checkSignature, newSigningSecret, signedHeaders } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { callbackAnswer, RelaySignatureError, verifyCallback, verifyRelaySignature } from './webhook-verify';

/** The SDK's vendored verifier against the relay's signer (packages/core), and the relay's own check, over the same cases. */
describe('relay signatures: the SDK verifies what the relay signs', () => {
  const secret = newSigningSecret();
  const other = newSigningSecret();
  const body = JSON.stringify({ type: 'subscribe', tenant_id: 't', user_id: 'u', channel: 'room:1', transport: 'ws', claims: {} });
  const now = 1_800_000_000;
  const reason = async (f: () => Promise<unknown>) => {
    try {
      await f();
      return 'ok';
    } catch (err) {
      return (err as RelaySignatureError).reason;
    }
  };

  const cases: Array<[string, Record<string, string>, string, number, string]> = [
    ['signed now', signedHeaders([secret], 'msg_1', now, body), body, now, 'ok'],
    ['signed with the new and the previous secret (rotation)', signedHeaders([other, secret], 'msg_2', now, body), body, now, 'ok'],
    ['within the tolerance', signedHeaders([secret], 'msg_3', now - 299, body), body, now, 'ok'],
    ['stale', signedHeaders([secret], 'msg_4', now - 301, body), body, now, 'stale'],
    ['from the future', signedHeaders([secret], 'msg_5', now + 301, body), body, now, 'stale'],
    ['another secret', signedHeaders([other], 'msg_6', now, body), body, now, 'bad_signature'],
    ['an altered body', signedHeaders([secret], 'msg_7', now, body), body.replace('room:1', 'room:2'), now, 'bad_signature'],
    ['another id', { ...signedHeaders([secret], 'msg_8', now, body), 'webhook-id': 'msg_9' }, body, now, 'bad_signature'],
    ['no signature header', { 'webhook-id': 'x', 'webhook-timestamp': String(now) }, body, now, 'missing_headers'],
    ['a timestamp that is no number', { ...signedHeaders([secret], 'msg_10', now, body), 'webhook-timestamp': '1e9' }, body, now, 'bad_timestamp'],
  ];

  it.each(cases)('%s', async (_name, headers, text, nowS, expected) => {
    expect(await reason(() => verifyRelaySignature(text, headers, secret, { nowS }))).toBe(expected);
    const relay = checkSignature(text, headers, secret, nowS);
    expect(relay.ok ? 'ok' : relay.reason).toBe(expected);
  });

  it('takes a Fetch Headers object, parses the request and builds the answer', async () => {
    const headers = new Headers(signedHeaders([secret], 'msg_11', now, body));
    await expect(verifyCallback(body, headers, [other, secret], { nowS: now })).resolves.toMatchObject({ type: 'subscribe', channel: 'room:1' });
    await expect(verifyCallback(body, headers, other, { nowS: now })).rejects.toBeInstanceOf(RelaySignatureError);
    expect(JSON.parse(callbackAnswer(true, { ttlS: 30, presence: { name: 'Ada' } }))).toEqual({ allow: true, ttl_s: 30, presence: { name: 'Ada' } });
    expect(JSON.parse(callbackAnswer(false))).toEqual({ allow: false });
  });
});
