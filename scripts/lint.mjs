// `npm run lint`: the type checks and eslint, side by side. One after the
// other they took 26 s on the 2-core machine (tsc 13 s, the console's tsc
// 3 s, eslint 10 s), which `npm test` pays before its first test; side by
// side 21 s. Each chain's output is printed whole when it ends, so the two
// never interleave; any failure fails the lint.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import process from 'node:process';

const chains = [
  [['tsc', '-p', 'tsconfig.json', '--noEmit']],
  [
    ['tsc', '-p', 'packages/console/tsconfig.json', '--noEmit'],
    ['eslint', '.'],
  ],
];

function run([command, ...args]) {
  return new Promise((resolve) => {
    // The workspace's own binaries, also when run as `node scripts/lint.mjs` outside npm.
    const child = spawn(join('node_modules', '.bin', command), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => resolve({ ok: false, output: `${command}: ${err.message}\n` }));
    child.on('close', (code) => resolve({ ok: code === 0, output: `${output}${code === 0 ? '' : `${command} ${args.join(' ')}: exit ${code}\n`}` }));
  });
}

async function runChain(steps) {
  for (const step of steps) {
    const { ok, output } = await run(step);
    if (output) process.stdout.write(output);
    if (!ok) return false;
  }
  return true;
}

const results = await Promise.all(chains.map(runChain));
process.exitCode = results.every(Boolean) ? 0 : 1;
