// Builds the operator console (packages/console) into its dist/, which
// tenant-registry serves at /console/ (docs/OPERATIONS.md "Operator
// console"). Run by the workspace's `prepare` (scripts/build-sdks.mjs, so
// by npm ci) and by `npm run build -w @service-relay/console`. An install
// without devDependencies has no vite: it skips, loudly, and the registry
// answers /console/ with 404.
import { log } from 'node:console';
import { createRequire } from 'node:module';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const root = fileURLToPath(new URL('../packages/console/', import.meta.url));
const require = createRequire(`${root}package.json`);
try {
  require.resolve('vite');
} catch {
  log('@service-relay/console: vite is not installed (an install without devDependencies); dist/ not built');
  process.exit(0);
}
const { build } = await import(require.resolve('vite'));
await build({
  root,
  base: '/console/',
  logLevel: 'warn',
  configFile: false,
  // JSX for Preact (esbuild's, through Vite's own transform): no Babel preset needed.
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // No inline script or style: the CSP allows 'self' only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2022',
    reportCompressedSize: false,
  },
});
log('@service-relay/console: built packages/console/dist');
