import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// No service imports another (scripts/start-all.ts, the launcher, may): shared code goes in packages/.
const OTHER_SERVICES = ['@service-relay/tenant-registry', '@service-relay/auth-verifier', '@service-relay/edge-gateway', '@service-relay/realtime'].map(
  (name) => ({ name, message: 'a service never imports another service; put shared code in packages/' }),
);
// Transport types stay out of domain folders (ARCHITECTURE.md "Code layout of a service").
const TRANSPORTS = ['@grpc/grpc-js', 'express', 'ws', 'node:http', 'http'].map((name) => ({
  name,
  message: 'domain code is free of transport types; move this into a transport folder (grpc/, http/, ws/)',
}));

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
    // Only config.ts files read the environment.
    files: ['services/*/src/**/*.ts', 'packages/*/src/**/*.ts'],
    ignores: ['**/config.ts', '**/*.test.ts', 'packages/testkit/**'],
    rules: {
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'read configuration in config.ts only' }],
    },
  },
  {
    files: ['services/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: OTHER_SERVICES }] },
  },
  {
    // Domain folders hold decisions, not transports (later entries replace the
    // rule's options, so the service rule is repeated here).
    files: ['services/*/src/keys/**/*.ts', 'services/*/src/token/**/*.ts', 'services/*/src/tenants/**/*.ts', 'services/realtime/src/messaging/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [...OTHER_SERVICES, ...TRANSPORTS] }] },
  },
);
