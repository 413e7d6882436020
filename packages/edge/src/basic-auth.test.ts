import { describe, expect, it } from 'vitest';
import { MAX_BASIC_HEADER_LENGTH, parseBasicAuthorization } from './authorization';

const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('parseBasicAuthorization', () => {
  it('splits id and secret at the first colon; the scheme is case-insensitive', () => {
    expect(parseBasicAuthorization(`Basic ${b64('hs_1:se:cret')}`)).toEqual({ clientId: 'hs_1', secret: 'se:cret' });
    expect(parseBasicAuthorization(`basic ${b64('id:s')}`)).toEqual({ clientId: 'id', secret: 's' });
    expect(parseBasicAuthorization(`Basic ${b64('id:s').replace(/=+$/, '')}`)).toEqual({ clientId: 'id', secret: 's' });
  });

  it('refuses everything else', () => {
    const cases = [undefined, '', 'Basic', 'Basic ', `Bearer ${b64('id:s')}`, b64('id:s'), `Basic ${b64('nocolon')}`, `Basic ${b64(':secret')}`, 'Basic a!b', `Basic ${b64('id:s')} extra`];
    for (const c of cases) expect(parseBasicAuthorization(c), String(c)).toBeUndefined();
    const huge = `Basic ${b64(`id:${'x'.repeat(MAX_BASIC_HEADER_LENGTH)}`)}`;
    expect(parseBasicAuthorization(huge)).toBeUndefined();
  });
});
