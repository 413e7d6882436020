import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { codeOf, ERROR_CODES, errorBody, grpcStatusFor, httpStatusFor, RelayError } from './errors';

describe('error codes', () => {
  it('map to the contract statuses and bodies', () => {
    expect(httpStatusFor('invalid_or_missing_token')).toBe(401);
    expect(httpStatusFor('auth_unavailable')).toBe(503);
    expect(httpStatusFor('payload_too_large')).toBe(413);
    expect(httpStatusFor('invalid_channel')).toBe(400);
    expect(httpStatusFor('not_found')).toBe(404);
    expect(errorBody('invalid_host_sync_credentials')).toBe('{"errors":["invalid_host_sync_credentials"]}');
    expect(errorBody('invalid_channel_rules', { problem: 'p' })).toBe('{"errors":["invalid_channel_rules"],"problem":"p"}');
    expect(grpcStatusFor('auth_unavailable')).toBe(status.UNAVAILABLE);
    expect(grpcStatusFor('invalid_internal_token')).toBe(status.UNAUTHENTICATED);
  });

  it('give every code a 4xx/5xx status and a body', () => {
    for (const code of ERROR_CODES) {
      expect(httpStatusFor(code)).toBeGreaterThanOrEqual(400);
      expect(JSON.parse(errorBody(code))).toEqual({ errors: [code] });
    }
  });

  it('treat anything unknown as internal', () => {
    expect(codeOf(new RelayError('rate_limited'))).toBe('rate_limited');
    expect(codeOf(new Error('boom'))).toBe('internal');
  });
});
