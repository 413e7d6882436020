import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { HostSyncHasher } from './host-sync-hasher';
import { SecretBox } from '@service-relay/core';
import { jwtSecretAad } from './tenant-crypto';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));
  const aad = jwtSecretAad('0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4', 3);

  it('seals to a v1. value with a fresh nonce and opens it again', () => {
    const a = box.seal('the secret', aad);
    const b = box.seal('the secret', aad);
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]+$/);
    expect(a).not.toBe(b);
    expect(box.open(a, aad)).toBe('the secret');
    expect(aad).toBe('service-relay:jwt-secret:0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4:3');
  });

  it('refuses another tenant or key version, a changed byte, another key or another format', () => {
    const sealed = box.seal('the secret', aad);
    expect(() => box.open(sealed, jwtSecretAad('0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c5', 3))).toThrow();
    expect(() => box.open(sealed, jwtSecretAad('0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4', 4))).toThrow();
    const raw = Buffer.from(sealed.slice(3), 'base64url');
    raw[14]! ^= 1;
    expect(() => box.open(`v1.${raw.toString('base64url')}`, aad)).toThrow();
    expect(() => new SecretBox(randomBytes(32)).open(sealed, aad)).toThrow();
    expect(() => box.open(`v2.${sealed.slice(3)}`, aad)).toThrow();
    expect(() => box.open('v1.AAAA', aad)).toThrow();
  });
});

describe('HostSyncHasher', () => {
  it('matches only the hashed secret, and only under the same SECRETS_KEY', () => {
    const key = randomBytes(32);
    const hasher = new HostSyncHasher(key);
    const hash = hasher.hash('secret-value');
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hasher.matches('secret-value', hash)).toBe(true);
    expect(hasher.matches('secret-valuf', hash)).toBe(false);
    expect(hasher.matches('secret-value', 'zz')).toBe(false);
    expect(new HostSyncHasher(randomBytes(32)).matches('secret-value', hash)).toBe(false);
    expect(new HostSyncHasher(key).hash('secret-value')).toBe(hash);
  });
});
