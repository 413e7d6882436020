import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EnvReader } from './config';
import { Keyring, LEGACY_KEY_ID, sealedKeyId, SecretBox, UnknownKeyError } from './index';

const k0 = randomBytes(32);
const k1 = randomBytes(32);
const AAD = 'service-relay:jwt-secret:0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4:1';

describe('Keyring', () => {
  it('seals with the newest key, naming it; the legacy key k0 keeps the v1. format of a single SECRETS_KEY', () => {
    const ring = new Keyring([{ id: 'k1', key: k1 }, { id: 'k0', key: k0 }]);
    const sealed = ring.seal('the secret', AAD);
    expect(sealed).toMatch(/^v2\.k1\.[A-Za-z0-9_-]+$/);
    expect(sealedKeyId(sealed)).toBe('k1');
    expect(ring.open(sealed, AAD)).toBe('the secret');
    const legacy = ring.seal('the secret', AAD, 'k0');
    expect(legacy).toMatch(/^v1\.[A-Za-z0-9_-]+$/);
    // What a registry without keyrings sealed and opens: byte for byte the SecretBox format.
    expect(new SecretBox(k0).open(legacy, AAD)).toBe('the secret');
    expect(ring.open(new SecretBox(k0).seal('old', AAD), AAD)).toBe('old');
    expect(Keyring.legacy(k0).seal('x', AAD)).toMatch(/^v1\./);
  });

  it('opens under every key it has; a value under a key it lacks is an UnknownKeyError naming the id only', () => {
    const both = new Keyring([{ id: 'k1', key: k1 }, { id: 'k0', key: k0 }]);
    const onlyOld = Keyring.legacy(k0);
    const underNew = both.seal('s', AAD);
    let err: unknown;
    try {
      onlyOld.open(underNew, AAD);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnknownKeyError);
    expect((err as UnknownKeyError).keyId).toBe('k1');
    expect((err as Error).message).toBe('sealed under key k1, which is not configured');
    expect((err as Error).message).not.toContain(k1.toString('base64'));
    expect(new Keyring([{ id: 'k1', key: k1 }]).open(underNew, AAD)).toBe('s');
  });

  it('refuses another key under the same id, other associated data, a changed byte, an unknown format', () => {
    const ring = new Keyring([{ id: 'k1', key: k1 }]);
    const sealed = ring.seal('s', AAD);
    expect(() => new Keyring([{ id: 'k1', key: randomBytes(32) }]).open(sealed, AAD)).toThrow();
    expect(() => ring.open(sealed, `${AAD}x`)).toThrow();
    const flipped = `${sealed.slice(0, -2)}${sealed.endsWith('AA') ? 'AB' : 'AA'}`;
    expect(() => ring.open(flipped, AAD)).toThrow();
    expect(() => ring.open(`v3.${sealed}`, AAD)).toThrow('unknown sealed secret format');
    expect(sealedKeyId('v2.bad id.xx')).toBeUndefined();
    expect(sealedKeyId('plain')).toBeUndefined();
  });

  it('sealWith switches the sealing key to one it has', () => {
    const ring = new Keyring([{ id: 'k1', key: k1 }, { id: 'k0', key: k0 }]);
    expect(ring.sealingKeyId).toBe('k1');
    ring.sealWith('k0');
    expect(sealedKeyId(ring.seal('s', AAD))).toBe(LEGACY_KEY_ID);
    expect(() => ring.sealWith('k9')).toThrow(UnknownKeyError);
  });

  it('derive gives the same ids with keys of their own, and the same sealing id', () => {
    const ring = new Keyring([{ id: 'k1', key: k1 }, { id: 'k0', key: k0 }]);
    const derived = ring.derive('service-relay:test');
    expect(derived.ids).toEqual(['k1', 'k0']);
    expect(derived.key('k1')!.equals(k1)).toBe(false);
    expect(derived.key('k1')).toEqual(ring.derive('service-relay:test').key('k1'));
    const sealed = derived.seal('s', AAD);
    expect(() => ring.open(sealed, AAD)).toThrow();
    expect(derived.open(sealed, AAD)).toBe('s');
  });
});

describe('SECRETS_KEYS and SECRETS_KEY read as a keyring', () => {
  const b64 = (k: Buffer) => k.toString('base64');
  const read = (env: Record<string, string>) => new EnvReader(env).secretsKeyring();
  const failure = (env: Record<string, string>): string => {
    try {
      read(env);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error('expected a ConfigError');
  };

  it('SECRETS_KEY alone is the keyring of k0, exactly as before', () => {
    expect(read({ SECRETS_KEY: b64(k0) })).toEqual([{ id: 'k0', key: k0 }]);
  });

  it('SECRETS_KEYS lists keys newest first; SECRETS_KEY beside it is k0, the oldest', () => {
    const k2 = randomBytes(32);
    expect(read({ SECRETS_KEYS: `k2:${b64(k2)}, k1:${b64(k1)}` })).toEqual([{ id: 'k2', key: k2 }, { id: 'k1', key: k1 }]);
    expect(read({ SECRETS_KEYS: `k1:${b64(k1)}`, SECRETS_KEY: b64(k0) })).toEqual([{ id: 'k1', key: k1 }, { id: 'k0', key: k0 }]);
    expect(read({ SECRETS_KEYS: `k0:${b64(k0)}` })).toEqual([{ id: 'k0', key: k0 }]);
  });

  it.each([
    [{}, /^configuration error: SECRETS_KEY is required .*or SECRETS_KEYS/],
    [{ SECRETS_KEYS: `${b64(k1)}` }, /^configuration error: SECRETS_KEYS entry 1 is not id:base64key/],
    [{ SECRETS_KEYS: `k1:${b64(k1)},` }, /^configuration error: SECRETS_KEYS has an empty entry/],
    [{ SECRETS_KEYS: `k 1:${b64(k1)}` }, /SECRETS_KEYS entry 1 is not id:base64key/],
    [{ SECRETS_KEYS: `k1:${b64(k1)},k1:${b64(k0)}` }, /SECRETS_KEYS names key k1 twice/],
    [{ SECRETS_KEYS: `k1:${b64(k1.subarray(0, 16))}` }, /SECRETS_KEYS \(key k1\) must be 32 bytes in base64/],
    [{ SECRETS_KEYS: `k1:${b64(Buffer.alloc(32))}` }, /SECRETS_KEYS \(key k1\) is a placeholder/],
    [{ SECRETS_KEYS: `k0:${b64(k1)}`, SECRETS_KEY: b64(k0) }, /SECRETS_KEYS names k0, the id SECRETS_KEY stands for/],
    [{ SECRETS_KEYS: `k1:${b64(k0)}`, SECRETS_KEY: b64(k0) }, /SECRETS_KEYS gives keys k1 and k0 the same value/],
    [{ SECRETS_KEYS: `k1:${b64(k1)}`, SECRETS_KEY: 'short' }, /^configuration error: SECRETS_KEY must be 32 bytes/],
  ])('refuses %o in one line naming the variable, never a key', (env, message) => {
    const text = failure(env);
    expect(text).toMatch(message);
    expect(text).not.toContain('\n');
    for (const k of [k0, k1]) {
      expect(text).not.toContain(b64(k));
      expect(text).not.toContain(b64(k).slice(0, 12));
    }
  });
});
