import { randomUUID } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { forgeToken, jsonFor, jsonWithDuplicate, malform, signToken, tokenClaims, tokenHeader } from './token-forge';

const secret = 'k'.repeat(43);
const tenantId = randomUUID();
const userId = randomUUID();

describe('token-forge', () => {
  it('signToken makes a token an independent library accepts', async () => {
    const token = signToken({ secret, tenantId, userId, expiresIn: 120 });
    const { payload } = await jwtVerify(token, new TextEncoder().encode(secret), { issuer: 'service-relay', audience: 'service-relay', algorithms: ['HS256'] });
    expect(payload).toMatchObject({ tenant_id: tenantId, user_id: userId });
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'HS256', typ: 'JWT', kid: tenantId });
  });

  it('makes each malformed shape it names', () => {
    const base = { secret, header: tokenHeader(tenantId), payload: tokenClaims({ tenantId, userId }) };
    expect(forgeToken({ ...base, headerSegment: malform.padded }).split('.')[0]).toMatch(/=+$/);
    expect(forgeToken({ ...base, payloadSegment: malform.whitespace('middle') })).toContain(' ');
    const nc = forgeToken({ ...base, payload: jsonFor(base.payload, 'nonCanonical'), payloadSegment: malform.nonCanonical }).split('.')[1]!;
    expect(Buffer.from(nc, 'base64url').toString('base64url')).not.toBe(nc);
    expect(forgeToken({ ...base, payload: jsonFor(base.payload, 'standardAlphabet'), payloadSegment: malform.standardAlphabet }).split('.')[1]).toMatch(/[+/]/);
    expect(jsonWithDuplicate({ a: 1 }, 'a', 2)).toBe('{"a":2,"a":1}');
    expect(forgeToken({ ...base, segments: (p) => [...p, 'x'] }).split('.')).toHaveLength(4);
  });
});
