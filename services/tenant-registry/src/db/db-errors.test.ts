import { isRelayError, RelayError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { classifyDbError, isServerSilence, isStatementError } from './db-errors';

const refusals = [
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
  Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
  Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
  Object.assign(new Error('connection failure'), { code: '08006' }),
  new Error('Connection terminated unexpectedly'),
];
const silence = [
  // pg's client-side read timeout: a hung server (issue #28: these were 500s).
  new Error('Query read timeout'),
  new Error('Connection terminated due to connection timeout'),
];

describe('classifyDbError', () => {
  it('makes a database that cannot be reached, or does not answer in time, `unavailable`', () => {
    const cases = [
      ...refusals,
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
  it('is true when the server let a statement or connection time out; false for a refusal, a busy pool, a statement error or our own errors', () => {
    for (const err of silence) expect(isServerSilence(err), err.message).toBe(true);
    for (const err of refusals) expect(isServerSilence(err), err.message).toBe(false);
    expect(isServerSilence(new Error('timeout exceeded when trying to connect'))).toBe(false);
    expect(isServerSilence(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isServerSilence(new RelayError('unavailable'))).toBe(false);
  });
});

describe('isStatementError', () => {
  it('is true for an error the server reported on a working connection, false for a lost or timed-out one', () => {
    expect(isStatementError(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(true);
    expect(isStatementError(Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }))).toBe(true);
    for (const err of [...refusals, ...silence]) expect(isStatementError(err), err.message).toBe(false);
  });
});
