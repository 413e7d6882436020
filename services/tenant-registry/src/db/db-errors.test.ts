import { isRelayError, RelayError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { classifyDbError, isServerSilence } from './db-errors';

const silence = [
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
  Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
  Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
  Object.assign(new Error('connection failure'), { code: '08006' }),
  new Error('Connection terminated unexpectedly'),
  // pg's client-side read timeout: a hung server (issue #28: these were 500s).
  new Error('Query read timeout'),
  new Error('Connection terminated due to connection timeout'),
];

describe('classifyDbError', () => {
  it('makes a database that cannot be reached, or does not answer in time, `unavailable`', () => {
    const cases = [
      ...silence,
      new Error('timeout exceeded when trying to connect'),
      Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
      Object.assign(new Error('could not obtain lock'), { code: '55P03' }),
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

describe('isServerSilence', () => {
  it('is true when the server itself did not answer, false for a busy pool, a statement error or our own errors', () => {
    for (const err of silence) expect(isServerSilence(err), err.message).toBe(true);
    expect(isServerSilence(new Error('timeout exceeded when trying to connect'))).toBe(false);
    expect(isServerSilence(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isServerSilence(new RelayError('unavailable'))).toBe(false);
  });
});
