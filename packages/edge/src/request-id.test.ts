import { describe, expect, it } from 'vitest';
import { requestIdOf } from './request-id';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('requestIdOf', () => {
  it('keeps a short plain id', () => {
    for (const id of ['a', 'req-1', 'A.b_c:d-9', 'x'.repeat(128)]) expect(requestIdOf(id)).toBe(id);
  });
  it('replaces anything else with a random UUID', () => {
    for (const id of [undefined, '', 'x'.repeat(129), 'a b', 'a\u00e9', 'a/b', ['a', 'b']]) expect(requestIdOf(id)).toMatch(UUID);
    expect(requestIdOf(undefined)).not.toBe(requestIdOf(undefined));
  });
});
