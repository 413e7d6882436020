import { isRelayError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { classifyDbError } from './db-errors';

describe('classifyDbError', () => {
  it('makes a database that cannot be reached `unavailable`', () => {
    const cases = [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
      Object.assign(new Error('connection failure'), { code: '08006' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
    ];
    for (const err of cases) {
      const out = classifyDbError(err);
      expect(isRelayError(out) && out.code, err.message).toBe('unavailable');
    }
  });

  it('leaves other errors as they are (a bug stays a 500)', () => {
    const err = Object.assign(new Error('duplicate key'), { code: '23505' });
    expect(classifyDbError(err)).toBe(err);
  });
});
