import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, redactUrl } from './logger';
import { safeEqual } from './timing-safe';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { lines, stream };
}

describe('logger', () => {
  it('censors credentials wherever our code logs them', () => {
    const { lines, stream } = capture();
    const log = createLogger({ service: 'test', destination: stream });
    log.info({ req: { headers: { authorization: 'Bearer abc.def.ghi' } }, token: 'tok-123', tenant: { jwt_secret_primary: 'sec-456' } }, 'hello');
    log.info({ headers: { authorization: 'Basic Zm9vOmJhcg==' }, body: { host_sync_client_secret: 'hs-789' } }, 'again');
    const text = lines.join('');
    for (const secret of ['abc.def.ghi', 'tok-123', 'sec-456', 'Zm9vOmJhcg==', 'hs-789']) expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
    expect(JSON.parse(lines[0]!)).toMatchObject({ service: 'test', msg: 'hello' });
  });

  it('censors token query parameters in URLs', () => {
    expect(redactUrl('/ws?access_token=eyJabc&x=1')).toBe('/ws?access_token=[redacted]&x=[redacted]');
    // Not on any name list, still never printed; a bare value in name position neither.
    expect(redactUrl('/api/v1/me?jwt=eyJhbGciOiJIUzI1NiJ9.e30.sig&limit=5')).toBe('/api/v1/me?jwt=[redacted]&limit=[redacted]');
    expect(redactUrl('/x?eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln&flag')).toBe('/x?[redacted]&flag');
    expect(redactUrl('/ws')).toBe('/ws');
  });
});

describe('safeEqual', () => {
  it('compares strings of any length', () => {
    expect(safeEqual('a'.repeat(40), 'a'.repeat(40))).toBe(true);
    expect(safeEqual('a'.repeat(40), 'a'.repeat(39))).toBe(false);
    expect(safeEqual('', '')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
  });
});
