import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The import boundaries of eslint.config.js, each shown failing on a deliberate
// violation (and a neighbour that is allowed passing), linted in memory with
// the project's own configuration.
const root = fileURLToPath(new URL('../..', import.meta.url));
const eslint = new ESLint({ cwd: root });

async function problems(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).map((m) => `${m.ruleId ?? 'parse'}: ${m.message}`);
}

const use = (what: string) => `${what}\nexport const used = x;\n`;

describe('lint: import boundaries', () => {
  it.each([
    ['services/realtime/src/ws/x.ts', "import { x } from '@service-relay/tenant-registry';", 'no-restricted-imports'],
    ['services/edge-gateway/src/x.ts', "import { x } from '@service-relay/auth-verifier';", 'no-restricted-imports'],
    ['services/edge-gateway/src/http/x.ts', "import { x } from '../../../realtime/src/ws/connection';", 'relay/no-foreign-relative-import'],
    ['services/tenant-registry/src/x.ts', "import { x } from '../../realtime/src/server';", 'relay/no-foreign-relative-import'],
    ['services/auth-verifier/src/x.test.ts', "import { x } from '../../edge-gateway/src/testing/gateway-harness';", 'relay/no-foreign-relative-import'],
    ['services/realtime/src/x.ts', "export { x } from '../../../packages/core/src/errors';", 'relay/no-foreign-relative-import'],
  ])('a service never imports another service: %s with %s', async (file, line, rule) => {
    expect((await problems(file, use(line))).join('\n')).toContain(`${rule}:`);
  });

  it('a relative import inside the service is allowed, even into a folder named like a service', async () => {
    expect(await problems('services/tenant-registry/src/http/x.ts', use("import { x } from '../realtime/realtime-client';"))).toEqual([]);
    expect(await problems('services/realtime/src/ws/x.ts', use("import { x } from '../topics/topic-hub';"))).toEqual([]);
  });

  it.each([
    ['services/auth-verifier/src/token/x.ts', "import { x } from '@grpc/grpc-js';"],
    ['services/auth-verifier/src/keys/x.ts', "import { x } from '@service-relay/grpc';"],
    ['services/tenant-registry/src/tenants/x.ts', "import { x } from 'node:http';"],
    ['services/realtime/src/messaging/x.ts', "import { x } from 'ws';"],
    ['services/realtime/src/topics/x.ts', "import { x } from '@service-relay/edge';"],
    ['services/auth-verifier/src/token/x.ts', "import { x } from '../grpc/registry-key-client';"],
    ['services/realtime/src/messaging/x.ts', "import { x } from '../ws/connection';"],
    ['services/realtime/src/authz/x.ts', "import { x } from '../ws/close-codes';"],
    ['services/realtime/src/authz/x.ts', "import { x } from 'ws';"],
  ])('a domain folder imports no transport: %s with %s', async (file, line) => {
    expect((await problems(file, use(line))).join('\n')).toMatch(/no-restricted-imports: .*(transport)/);
  });

  it('a domain folder may import the domain and core', async () => {
    expect(await problems('services/auth-verifier/src/token/x.ts', use("import { x } from '@service-relay/verdict';\nimport { y } from '../keys/key-source';\nexport const z = y;"))).toEqual([]);
  });

  it.each([
    ['services/auth-verifier/src/token/x.ts'],
    ['services/auth-verifier/src/grpc-handlers.ts'],
    ['services/tenant-registry/src/http/x.ts'],
  ])('only the verifier callers import its client: %s', async (file) => {
    expect((await problems(file, use("import { x } from '@service-relay/verifier-client';"))).join('\n')).toMatch(/no-restricted-imports: .*only the verifier's callers/);
  });

  it.each([['services/edge-gateway/src/auth/x.ts'], ['services/realtime/src/ws/x.ts'], ['services/auth-verifier/src/server.test.ts']])(
    'the verifier callers (and service tests) may import its client: %s',
    async (file) => {
      expect(await problems(file, use("import { x } from '@service-relay/verifier-client';"))).toEqual([]);
    },
  );

  it.each([
    ['packages/grpc/src/x.ts', "import { x } from '@service-relay/realtime';"],
    ['packages/core/src/x.ts', "import { x } from '../../../services/realtime/src/server';"],
  ])('a package never imports a service: %s with %s', async (file, line) => {
    expect((await problems(file, use(line))).join('\n')).toMatch(/no-restricted-imports: .*(service)/);
  });

  it.each([
    ['packages/core/src/x.ts', "import { x } from '@service-relay/edge';"],
    ['packages/core/src/x.ts', "import { x } from '@service-relay/channels';"],
    ['packages/core/src/x.ts', "export { x } from '../../channels/src/channel-rules';"],
    ['packages/core/src/x.ts', "import { x } from '@service-relay/testkit';"],
    ['packages/core/src/x.test.ts', "import { x } from '@service-relay/testkit';"],
    ['packages/core/src/x.ts', "import x from 'express';"],
  ])('core imports no workspace package and no HTTP framework: %s with %s', async (file, line) => {
    expect((await problems(file, use(line))).join('\n')).toMatch(/relay\/package-layers: .*core keeps configuration/);
  });

  it.each([
    ['packages/channels/src/x.ts', "import { x } from '@service-relay/edge';"],
    ['packages/channels/src/x.ts', "import { x } from '@service-relay/grpc';"],
    ['packages/channels/src/x.ts', "import { x } from 'node:http';"],
    ['packages/channels/src/x.ts', "import { x } from '../../edge/src/error-response';"],
  ])('channel rules import core only, and no transport: %s with %s', async (file, line) => {
    expect((await problems(file, use(line))).join('\n')).toMatch(/relay\/package-layers: .*channel rules and capabilities are domain/);
  });

  it('core may import its own modules, and channels core', async () => {
    expect(await problems('packages/core/src/x.ts', use("import { x } from './errors';"))).toEqual([]);
    expect(await problems('packages/channels/src/x.ts', use("import { x } from '@service-relay/core';\nimport { y } from './channel-name';\nexport const z = y;"))).toEqual([]);
  });

  it.each([
    ['services/realtime/src/http/x.ts'],
    ['services/tenant-registry/src/server.ts'],
    ['packages/edge/src/x.ts'],
    ['packages/core/src/x.ts'],
  ])('test helpers stay out of production code: %s', async (file) => {
    expect((await problems(file, use("import { x } from '@service-relay/testkit';"))).join('\n')).toMatch(/relay\/package-layers: .*test helpers are for test code only/);
  });

  it.each([
    ['services/realtime/src/http/x.test.ts'],
    ['services/realtime/src/test-support/x.ts'],
    ['services/edge-gateway/src/testing/x.ts'],
    ['services/realtime/src/presence/x.contract.ts'],
    ['packages/edge/src/x.test.ts'],
  ])('test code may use the test helpers: %s', async (file) => {
    expect(await problems(file, use("import { x } from '@service-relay/testkit';"))).toEqual([]);
  });
});
