import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import noForeignRelativeImport from './scripts/eslint/no-foreign-relative-import.js';
import packageLayers from './scripts/eslint/package-layers.js';

// Import boundaries (docs/ARCHITECTURE.md "Map of the code"); scripts/eslint/boundaries.test.ts
// shows each one failing on a deliberate violation. Later entries replace the
// options of no-restricted-imports for the files they match, so every entry
// below lists all the restrictions its files carry.

// No service imports another (scripts/start-all.ts, the launcher, may): shared code goes in packages/.
// Relative paths into another service are caught by relay/no-foreign-relative-import.
const SERVICES = ['@service-relay/tenant-registry', '@service-relay/auth-verifier', '@service-relay/edge-gateway', '@service-relay/realtime'];
const OTHER_SERVICES = SERVICES.map((name) => ({ name, message: 'a service never imports another service; put shared code in packages/' }));
// Only the verifier's callers use its client; the verdict types are @service-relay/verdict, their wire form @service-relay/grpc.
const VERIFIER_CLIENT = [
  {
    name: '@service-relay/verifier-client',
    message: "only the verifier's callers (edge-gateway, realtime) import its client; take verdict types from @service-relay/verdict, the wire mapping from @service-relay/grpc",
  },
];
// Transport types stay out of domain folders (ARCHITECTURE.md "Code layout of a service").
const TRANSPORTS = ['@grpc/grpc-js', '@service-relay/grpc', '@service-relay/edge', 'express', 'ws', 'node:http', 'http', 'node:http2', 'http2', 'undici'].map((name) => ({
  name,
  message: 'domain code is free of transport types; move this into a transport folder (grpc/, http/, ws/)',
}));
// ...nor do they reach into the service's own transport folders.
const TRANSPORT_FOLDERS = [{ regex: '^(\\.\\./)+(grpc|http|ws)(/|$)', message: 'domain code does not import transport folders (grpc/, http/, ws/); the transport calls the domain' }];
// Packages are below services: none imports a service, by name or by path.
const SERVICE_PATHS = [{ regex: '(^|/)services/', message: 'a package never imports a service; move the shared code into packages/' }];

// The layers of packages/ (relay/package-layers; each applies on its own, so they
// are not subject to the replacing above). Test code is tests, contract suites
// and their cases, and the test-support/, testing/ and test/ folders.
const TEST_CODE = '(\\.test\\.ts|\\.contract\\.ts|-contract(-[a-z-]+)?\\.ts|\\.cases\\.ts)$|/(test-support|testing|test)/';
const LAYERS = [
  {
    files: '^packages/core/',
    forbid: '^(@service-relay/|express$|ws$)',
    message:
      'core keeps configuration, logging, errors, lifecycle and tracing and imports no workspace package: the HTTP edge is @service-relay/edge, channel rules @service-relay/channels, test helpers @service-relay/testkit',
  },
  {
    files: '^packages/channels/',
    forbid: '^(@service-relay/(?!core$)|@grpc/|express$|ws$|(node:)?(http|https|http2)$|undici$)',
    message: 'channel rules and capabilities are domain: they import core only, and no transport',
  },
  {
    files: '^(packages|services)/[^/]+/src/',
    except: `^packages/testkit/|${TEST_CODE}`,
    forbid: '^@service-relay/testkit$',
    message: 'test helpers are for test code only (*.test.ts, contract suites, test-support/, testing/); a helper that production code needs belongs in its own package',
  },
];

// Our own rules (scripts/eslint/).
const relay = { rules: { 'no-foreign-relative-import': noForeignRelativeImport, 'package-layers': packageLayers } };

const SERVICE_FILES = ['services/**/*.ts'];
const VERIFIER_CALLERS = ['services/edge-gateway/**/*.ts', 'services/realtime/**/*.ts'];
const SERVICE_TESTS = ['services/**/*.test.ts', 'services/*/src/test-support/**', 'services/*/src/testing/**', 'services/*/test/**'];
const DOMAIN_FOLDERS = ['keys', 'token', 'tenants', 'messaging', 'topics', 'timers'].map((dir) => `services/*/src/${dir}/**/*.ts`);

export default tseslint.config(
  { ignores: ['**/node_modules/**', '.data/**', 'bench/results/**', 'packages/*/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.object.name=/^(it|test|describe)$/][callee.property.name='only']", message: 'no focused tests' },
      ],
    },
  },
  {
    files: ['packages/*/src/**/*.ts', 'services/*/src/**/*.ts', 'services/*/test/**/*.ts'],
    plugins: { relay },
    rules: { 'relay/package-layers': ['error', LAYERS] },
  },
  {
    // Only config.ts files read the environment.
    files: ['services/*/src/**/*.ts', 'packages/*/src/**/*.ts'],
    ignores: ['**/config.ts', '**/*.test.ts', 'packages/testkit/**'],
    rules: {
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'read configuration in config.ts only' }],
    },
  },
  {
    files: SERVICE_FILES,
    plugins: { relay },
    rules: {
      'relay/no-foreign-relative-import': 'error',
      'no-restricted-imports': ['error', { paths: [...OTHER_SERVICES, ...VERIFIER_CLIENT] }],
    },
  },
  {
    // The verifier's callers, and every service's tests (they start a verifier and ask it).
    files: [...VERIFIER_CALLERS, ...SERVICE_TESTS],
    rules: { 'no-restricted-imports': ['error', { paths: OTHER_SERVICES }] },
  },
  {
    // Domain folders hold decisions, not transports.
    files: DOMAIN_FOLDERS,
    rules: { 'no-restricted-imports': ['error', { paths: [...OTHER_SERVICES, ...VERIFIER_CLIENT, ...TRANSPORTS], patterns: TRANSPORT_FOLDERS }] },
  },
  {
    // realtime's authorization decisions (channel access, revocation rule) are domain as well; their
    // tests drive them over WebSocket and REST, like the service's other tests.
    files: ['services/realtime/src/authz/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [...OTHER_SERVICES, ...VERIFIER_CLIENT, ...TRANSPORTS], patterns: TRANSPORT_FOLDERS }] },
  },
  {
    files: ['packages/*/src/**/*.ts'],
    ignores: ['**/*.test.ts', 'packages/testkit/**'],
    rules: { 'no-restricted-imports': ['error', { paths: OTHER_SERVICES, patterns: SERVICE_PATHS }] },
  },
);
