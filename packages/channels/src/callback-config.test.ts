import { describe, expect, it } from 'vitest';
import { callbackApplies, parseCallbackSettings, type CallbackSettings } from './callback-config';

describe('callback settings (#32)', () => {
  it.each([
    [{ url: 'https://host.example/cb', subscribe: ['room:*'] }, false, undefined],
    [{ url: 'http://127.0.0.1:9000/cb', publish: ['*'] }, false, undefined],
    [{ url: 'http://[::1]:9000/cb', publish: ['*'] }, false, undefined],
    [{ url: 'http://localhost/cb', publish: ['x'] }, false, undefined],
    [{ url: 'http://host.example/cb', subscribe: ['room:*'] }, true, undefined],
    [{ url: 'http://host.example/cb', subscribe: ['room:*'] }, false, 'url must be https'],
    [{ url: 'ftp://host.example/cb', subscribe: ['room:*'] }, true, 'url must be https'],
    [{ url: 'https://u:p@host.example/cb', subscribe: ['room:*'] }, false, 'credentials'],
    [{ url: 'https://host.example/cb#x', subscribe: ['room:*'] }, false, 'fragment'],
    [{ url: 'not a url', subscribe: ['room:*'] }, false, 'absolute URL'],
    [{ url: 'https://host.example/cb' }, false, 'at least one channel pattern'],
    [{ url: 'https://host.example/cb', subscribe: ['a*b'] }, false, 'not a channel pattern'],
    [{ url: 'https://host.example/cb', subscribe: ['room:*'], timeout_ms: 49 }, false, 'timeout_ms'],
    [{ url: 'https://host.example/cb', subscribe: ['room:*'], timeout_ms: 10_001 }, false, 'timeout_ms'],
    [{ url: 'https://host.example/cb', subscribe: ['room:*'], extra: 1 }, false, 'unknown field'],
    [[], false, 'the body is'],
  ])('%j (allowHttp %s): %s', (doc, allowHttp, problem) => {
    const out = parseCallbackSettings(doc, allowHttp);
    if (problem === undefined) expect(typeof out).toBe('object');
    else expect(out).toEqual(expect.stringContaining(problem));
  });

  it('defaults the timeout to 1 s, sorts and dedupes patterns, and matches like the rules (exact, prefix*, *)', () => {
    const s = parseCallbackSettings({ url: 'https://h.example/', subscribe: ['room:*', 'lobby', 'room:*'], publish: ['*'] }, false) as CallbackSettings;
    expect(s).toEqual({ url: 'https://h.example/', subscribe: ['lobby', 'room:*'], publish: ['*'], timeoutMs: 1000 });
    expect(callbackApplies(s, 'room:1', 'subscribe')).toBe(true);
    expect(callbackApplies(s, 'lobby', 'subscribe')).toBe(true);
    expect(callbackApplies(s, 'lobby2', 'subscribe')).toBe(false);
    expect(callbackApplies(s, 'anything', 'publish')).toBe(true);
    expect(callbackApplies(undefined, 'room:1', 'subscribe')).toBe(false);
  });
});
