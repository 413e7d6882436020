import { readFileSync } from 'node:fs';
import openapiTS, { astToString } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';

const DOC = new URL('../docs/openapi.yaml', import.meta.url);
const TYPES = new URL('../packages/console/src/api/openapi.generated.ts', import.meta.url);

describe('the console API types', () => {
  it('are docs/openapi.yaml as it is now (an API change regenerates them and then breaks the console type-check, not its users)', async () => {
    const generated = astToString(await openapiTS(DOC));
    // The file carries the CLI's header; the types are what must match.
    const stored = readFileSync(TYPES, 'utf8');
    expect(stored.slice(stored.indexOf('export interface paths')), 'run: npm run types -w @service-relay/console').toBe(generated.slice(generated.indexOf('export interface paths')));
  }, 30_000);
});
