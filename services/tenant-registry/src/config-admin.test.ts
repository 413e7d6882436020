import { randomBytes } from 'node:crypto';
import { ConfigError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';

// ADMIN_TOKEN_NEXT and the audit log's settings (the rest of loadConfig is in config.test.ts).
const BASE = {
  ADMIN_TOKEN: randomBytes(32).toString('base64url'),
  INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
  SECRETS_KEY: randomBytes(32).toString('base64'),
};

function failure(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig: admin tokens and the audit log', () => {
  it('has no next admin token, 90 days of audit and 10 failed authentications a minute by default', () => {
    expect(loadConfig(BASE)).toMatchObject({ adminTokenNext: undefined, auditRetentionMs: 90 * 86_400_000, auditUnauthenticatedPerMinute: 10 });
    expect(loadConfig({ ...BASE, ADMIN_TOKEN_NEXT: '' }).adminTokenNext).toBeUndefined();
  });

  it('reads ADMIN_TOKEN_NEXT under the same rules as ADMIN_TOKEN, never echoing it', () => {
    const next = randomBytes(32).toString('base64url');
    expect(loadConfig({ ...BASE, ADMIN_TOKEN_NEXT: next }).adminTokenNext).toBe(next);
    const short = failure({ ...BASE, ADMIN_TOKEN_NEXT: 'too-short-secret-value' });
    expect(short.variable).toBe('ADMIN_TOKEN_NEXT');
    expect(short.message).not.toContain('too-short-secret-value');
  });

  it('reads AUDIT_RETENTION_DAYS and AUDIT_UNAUTHENTICATED_PER_MINUTE', () => {
    expect(loadConfig({ ...BASE, AUDIT_RETENTION_DAYS: '7', AUDIT_UNAUTHENTICATED_PER_MINUTE: '0' })).toMatchObject({ auditRetentionMs: 7 * 86_400_000, auditUnauthenticatedPerMinute: 0 });
    for (const v of ['0', '3651', 'x', '1.5']) expect(failure({ ...BASE, AUDIT_RETENTION_DAYS: v }).variable).toBe('AUDIT_RETENTION_DAYS');
    for (const v of ['-1', '1001', 'ten']) expect(failure({ ...BASE, AUDIT_UNAUTHENTICATED_PER_MINUTE: v }).variable).toBe('AUDIT_UNAUTHENTICATED_PER_MINUTE');
  });
});
