import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REJECT_EXPLANATIONS } from './reject-explanation';
import { REJECT_REASONS } from './reject-reason';

const API_MD = readFileSync(new URL('../../../../docs/API.md', import.meta.url), 'utf8');

describe('reject reasons are explained, and documented where a host developer looks', () => {
  it('every reason code has a meaning and a fix', () => {
    expect(Object.keys(REJECT_EXPLANATIONS).sort()).toEqual([...REJECT_REASONS].sort());
  });

  it.each([...REJECT_REASONS])('docs/API.md "Why a token is refused" has %s with the meaning and fix explain-token answers', (reason) => {
    const { meaning, fix } = REJECT_EXPLANATIONS[reason];
    const esc = (t: string) => t.replace(/\|/g, '\\|');
    expect(API_MD).toContain(`| \`${reason}\` | ${esc(meaning)} | ${esc(fix)} |`);
  });
});
