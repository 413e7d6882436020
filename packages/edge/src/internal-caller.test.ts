import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { internalCaller } from './internal-caller';

const request = (headers: IncomingMessage['headers']) => ({ headers }) as IncomingMessage;

describe('internalCaller', () => {
  const isInternal = internalCaller('the-internal-token');

  it.each([
    ['the token', { 'x-internal-token': 'the-internal-token' }, true],
    ['no token', {}, false],
    ['another token', { 'x-internal-token': 'not-the-token' }, false],
    ['a prefix of it', { 'x-internal-token': 'the-internal' }, false],
    ['an empty one', { 'x-internal-token': '' }, false],
    ['the token repeated (an array)', { 'x-internal-token': ['the-internal-token', 'the-internal-token'] as unknown as string }, false],
  ])('%s', (_name, headers, expected) => {
    expect(isInternal(request(headers))).toBe(expected);
  });
});
