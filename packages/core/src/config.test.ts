import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, EnvReader, fillEmbeddedSecrets, loadOrCreateEmbeddedSecrets, parseEnvFile } from './config';
import { readRedisSettings, requireRedisWhenAlone } from './redis-config';

const reader = (env: Record<string, string>) => new EnvReader(env);

describe('EnvReader', () => {
  it('names the variable in a one-line error', () => {
    expect(() => reader({ GATEWAY_PORT: 'eighty' }).port('GATEWAY_PORT', 8080)).toThrow('configuration error: GATEWAY_PORT must be an integer, got "eighty"');
    expect(() => reader({ GATEWAY_PORT: '70000' }).port('GATEWAY_PORT', 8080)).toThrow(/GATEWAY_PORT must be between 0 and 65535/);
    expect(() => reader({}).credential('ADMIN_TOKEN')).toThrow(ConfigError);
    expect(() => reader({ ADMIN_TOKEN: 'short' }).credential('ADMIN_TOKEN')).toThrow('configuration error: ADMIN_TOKEN must be at least 32 characters');
  });

  it('never echoes a credential it rejects', () => {
    try {
      reader({ ADMIN_TOKEN: 'secret-value' }).credential('ADMIN_TOKEN');
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).not.toContain('secret-value');
    }
  });

  it('reads INTERNAL_TOKEN, and INTERNAL_TOKEN_NEXT beside it during a rotation (sent: INTERNAL_TOKEN; accepted: both)', () => {
    const current = 'Kq2b7dX0pLm4Rt8vYw1zNc5sHj3gFe6a';
    const next = 'Zx9cVb8nMq7wEr6tYu5iOp4aSd3fGh2j';
    expect(reader({ INTERNAL_TOKEN: current }).internalTokens()).toEqual({ internalToken: current, acceptedInternalTokens: [current] });
    expect(reader({ INTERNAL_TOKEN: current, INTERNAL_TOKEN_NEXT: next }).internalTokens()).toEqual({ internalToken: current, acceptedInternalTokens: [current, next] });
    expect(() => reader({ INTERNAL_TOKEN: current, INTERNAL_TOKEN_NEXT: current }).internalTokens()).toThrow(/INTERNAL_TOKEN_NEXT equals INTERNAL_TOKEN/);
    expect(() => reader({ INTERNAL_TOKEN: current, INTERNAL_TOKEN_NEXT: 'short' }).internalTokens()).toThrow(/INTERNAL_TOKEN_NEXT must be at least 32 characters/);
  });

  it('reads defaults, integers, booleans and URLs', () => {
    const r = reader({ A: '12', B: 'true', U: 'redis://127.0.0.1:6379' });
    expect(r.int('A', 1, 0, 100)).toBe(12);
    expect(r.int('MISSING', 7, 0, 100)).toBe(7);
    expect(r.bool('B', false)).toBe(true);
    expect(r.url('U', ['redis:'])).toBe('redis://127.0.0.1:6379');
    expect(() => reader({ U: 'http://x' }).url('U', ['redis:'])).toThrow(/U must use redis:/);
    expect(() => reader({ U: 'not a url' }).url('U', ['redis:'])).toThrow(/U is not a valid URL/);
    expect(() => reader({ V: 'x:y' }).address('V', 'a:1')).toThrow(/V must be host:port/);
  });

  it('reads a gRPC address list as a grpc-js ipv4:/ipv6: target, and one address as it is', () => {
    expect(reader({ V: 'registry:50052' }).addressList('V', 'a:1')).toBe('registry:50052');
    expect(reader({}).addressList('V', '127.0.0.1:50052')).toBe('127.0.0.1:50052');
    expect(reader({ V: '10.0.0.1:50052, 10.0.0.2:50052' }).addressList('V', 'a:1')).toBe('ipv4:10.0.0.1:50052,10.0.0.2:50052');
    expect(reader({ V: '[fd00::1]:50052,[fd00::2]:50052' }).addressList('V', 'a:1')).toBe('ipv6:[fd00::1]:50052,[fd00::2]:50052');
    expect(() => reader({ V: 'a:1,b:2' }).addressList('V', 'a:1')).toThrow(/V as a list must name IP addresses/);
    expect(() => reader({ V: '10.0.0.1:1,[fd00::1]:2' }).addressList('V', 'a:1')).toThrow(/all IPv4/);
    expect(() => reader({ V: '10.0.0.1:1,,10.0.0.2:1' }).addressList('V', 'a:1')).toThrow(/V has an empty entry/);
    expect(() => reader({ V: '10.0.0.1:1,10.0.0.1:1' }).addressList('V', 'a:1')).toThrow(/V lists the same address twice/);
    expect(() => reader({ V: '10.0.0.1:1,10.0.0.2:70000' }).addressList('V', 'a:1')).toThrow(/must name IP addresses/);
    expect(() => reader({ V: '10.0.0.256:1,10.0.0.2:1' }).addressList('V', 'a:1')).toThrow(/must name IP addresses/);
    expect(() => reader({ V: 'x:y' }).addressList('V', 'a:1')).toThrow(/V must be host:port/);
  });

  it('reads a URL list: the fallback alone, entries without trailing slashes, no empty or repeated entry', () => {
    expect(reader({}).urlList('V', 'http://127.0.0.1:1')).toEqual(['http://127.0.0.1:1']);
    expect(reader({ V: 'http://a:1/, https://b:2' }).urlList('V', 'http://x:1')).toEqual(['http://a:1', 'https://b:2']);
    expect(() => reader({ V: 'http://a:1,,http://b:2' }).urlList('V', 'http://x:1')).toThrow(/V has an empty entry/);
    expect(() => reader({ V: 'http://a:1,http://a:1/' }).urlList('V', 'http://x:1')).toThrow(/V lists the same URL twice/);
    expect(() => reader({ V: 'http://a:1,ftp://b:2' }).urlList('V', 'http://x:1')).toThrow(/V must use http: or https:/);
  });

  it('accepts a SECRETS_KEY of exactly 32 base64 bytes', () => {
    const good = Buffer.from(Array.from({ length: 32 }, (_v, i) => i * 7)).toString('base64');
    expect(reader({ SECRETS_KEY: good }).secretsKey()).toHaveLength(32);
    expect(() => reader({ SECRETS_KEY: Buffer.alloc(16).toString('base64') }).secretsKey()).toThrow(/SECRETS_KEY must be 32 bytes/);
    expect(() => reader({}).secretsKey()).toThrow(/SECRETS_KEY is required/);
  });

  it('requires REDIS_URL for a service started alone', () => {
    const settings = readRedisSettings(reader({}));
    expect(settings).toEqual({ url: undefined, prefix: 'relay:' });
    expect(() => requireRedisWhenAlone(settings, true)).toThrow(/REDIS_URL is required when a service runs alone/);
    expect(() => requireRedisWhenAlone(settings, false)).not.toThrow();
    expect(() => readRedisSettings(reader({ REDIS_PREFIX: 'bad prefix' }))).toThrow(/REDIS_PREFIX/);
  });
});

describe('embedded secrets', () => {
  it('are generated once, private to the owner, and reused', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-secrets-'));
    const first = loadOrCreateEmbeddedSecrets(dir);
    expect(first.created).toBe(true);
    expect(statSync(first.file).mode & 0o777).toBe(0o600);
    expect(first.values.ADMIN_TOKEN.length).toBeGreaterThanOrEqual(32);
    expect(Buffer.from(first.values.SECRETS_KEY!, 'base64')).toHaveLength(32);
    const second = loadOrCreateEmbeddedSecrets(dir);
    expect(second.created).toBe(false);
    expect(second.values).toEqual(first.values);
    expect(parseEnvFile(readFileSync(first.file, 'utf8'))).toEqual(first.values);
  });
});

describe('embedded secrets with a keyring (docs/OPERATIONS.md "Rotating SECRETS_KEY")', () => {
  const k1 = `k1:${Buffer.from(Array.from({ length: 32 }, (_v, i) => i * 5 + 3)).toString('base64')}`;

  it('fill what the environment lacks: the tokens one by one, the keyring whole from the file or not at all', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-secrets-'));
    const file = loadOrCreateEmbeddedSecrets(dir).values;
    const env: Record<string, string | undefined> = {};
    expect(fillEmbeddedSecrets(env, dir)?.created).toBe(false);
    expect(env).toMatchObject({ ADMIN_TOKEN: file.ADMIN_TOKEN, INTERNAL_TOKEN: file.INTERNAL_TOKEN, SECRETS_KEY: file.SECRETS_KEY });
    const own: Record<string, string | undefined> = { SECRETS_KEYS: k1 };
    fillEmbeddedSecrets(own, dir);
    expect(own.SECRETS_KEY).toBeUndefined();
    expect(own.ADMIN_TOKEN).toBe(file.ADMIN_TOKEN);
    const full = { ADMIN_TOKEN: 'a', INTERNAL_TOKEN: 'b', SECRETS_KEY: 'c' };
    expect(fillEmbeddedSecrets(full, dir)).toBeUndefined();
  });

  it('the file may hold SECRETS_KEYS beside SECRETS_KEY (step 1) or instead of it (step 3)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-secrets-'));
    const first = loadOrCreateEmbeddedSecrets(dir).values;
    writeFileSync(join(dir, 'secrets.env'), `ADMIN_TOKEN=${first.ADMIN_TOKEN}\nINTERNAL_TOKEN=${first.INTERNAL_TOKEN}\nSECRETS_KEY=${first.SECRETS_KEY}\nSECRETS_KEYS=${k1}\n`);
    const both: Record<string, string | undefined> = {};
    fillEmbeddedSecrets(both, dir);
    expect(new EnvReader(both).secretsKeyring().map((e) => e.id)).toEqual(['k1', 'k0']);
    writeFileSync(join(dir, 'secrets.env'), `ADMIN_TOKEN=${first.ADMIN_TOKEN}\nINTERNAL_TOKEN=${first.INTERNAL_TOKEN}\nSECRETS_KEYS=${k1}\n`);
    const after: Record<string, string | undefined> = {};
    fillEmbeddedSecrets(after, dir);
    expect(new EnvReader(after).secretsKeyring().map((e) => e.id)).toEqual(['k1']);
    writeFileSync(join(dir, 'secrets.env'), `ADMIN_TOKEN=${first.ADMIN_TOKEN}\nINTERNAL_TOKEN=${first.INTERNAL_TOKEN}\n`);
    expect(() => loadOrCreateEmbeddedSecrets(dir)).toThrow(/^configuration error: SECRETS_KEY is missing from /);
  });
});

describe('secrets refused at start', () => {
  const strong = 'Zq3vN8kP2xW7rT5yL1mB9cD4fG6hJ0aS';
  it.each([
    ['too short', 'Zq3vN8kP2xW7', /ADMIN_TOKEN must be at least 32 characters/],
    ['the .env.example placeholder', 'change-me-admin-token-at-least-32-characters', /ADMIN_TOKEN is a placeholder value/],
    ['one repeated character', 'a'.repeat(40), /ADMIN_TOKEN is not random enough/],
    ['all zeros', '0'.repeat(64), /ADMIN_TOKEN is not random enough/],
    ['two characters alternating', 'ab'.repeat(20), /ADMIN_TOKEN is not random enough/],
  ])('refuses a credential that is %s, in one line naming the variable', (_case, value, message) => {
    expect(() => reader({ ADMIN_TOKEN: value }).credential('ADMIN_TOKEN')).toThrow(message);
    try {
      reader({ ADMIN_TOKEN: value }).credential('ADMIN_TOKEN');
    } catch (err) {
      expect((err as Error).message).not.toContain('\n');
      expect((err as Error).message).not.toContain(value);
    }
    expect(reader({ ADMIN_TOKEN: value, ALLOW_INSECURE_SECRETS: 'true' }).credential('ADMIN_TOKEN')).toBe(value);
  });

  it('accepts a random credential', () => {
    expect(reader({ INTERNAL_TOKEN: strong }).credential('INTERNAL_TOKEN')).toBe(strong);
  });

  it('refuses an all-zero or single-byte SECRETS_KEY unless insecure secrets are allowed', () => {
    for (const key of [Buffer.alloc(32), Buffer.alloc(32, 7)]) {
      const v = key.toString('base64');
      expect(() => reader({ SECRETS_KEY: v }).secretsKey()).toThrow(/^configuration error: SECRETS_KEY is a placeholder/);
      expect(reader({ SECRETS_KEY: v, ALLOW_INSECURE_SECRETS: 'true' }).secretsKey()).toHaveLength(32);
    }
  });

  it('the .env.example values are refused; the generated embedded ones are accepted', () => {
    const example = parseEnvFile(readFileSync(join(__dirname, '../../../.env.example'), 'utf8'));
    expect(() => reader(example).credential('ADMIN_TOKEN')).toThrow(/ADMIN_TOKEN/);
    expect(() => reader(example).credential('INTERNAL_TOKEN')).toThrow(/INTERNAL_TOKEN/);
    expect(() => reader(example).secretsKey()).toThrow(/SECRETS_KEY/);
    const generated = loadOrCreateEmbeddedSecrets(mkdtempSync(join(tmpdir(), 'relay-secrets-'))).values;
    const r = reader(generated);
    expect(() => [r.credential('ADMIN_TOKEN'), r.credential('INTERNAL_TOKEN'), r.secretsKey()]).not.toThrow();
  });
});

describe('bind addresses', () => {
  it('default to loopback, BIND_HOST for all, a listener variable for one', () => {
    expect(reader({}).bindHost('GATEWAY_HOST')).toBe('127.0.0.1');
    expect(reader({ BIND_HOST: '0.0.0.0' }).bindHost('GATEWAY_HOST')).toBe('0.0.0.0');
    expect(reader({ BIND_HOST: '0.0.0.0', GATEWAY_HOST: '10.0.0.5' }).bindHost('GATEWAY_HOST')).toBe('10.0.0.5');
    expect(reader({ REALTIME_HOST: '::' }).bindHost('REALTIME_HOST')).toBe('::');
    expect(() => reader({ GATEWAY_HOST: 'bad host' }).bindHost('GATEWAY_HOST')).toThrow(/GATEWAY_HOST must be an IP address or host name/);
    expect(() => reader({ BIND_HOST: 'a/b' }).bindHost('GATEWAY_HOST')).toThrow(/BIND_HOST must be/);
  });
});
