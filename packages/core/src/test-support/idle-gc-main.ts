// A process that is busy with ticks, goes quiet through full GCs, and is busy again:
// run under `--trace-deopt --expose-gc` by tick-shape.test.ts. With `runMain`
// as its argument it starts the way every service does; with `bare`, as plain Node.
import { runMain } from '../lifecycle';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

function noop(): void {}

async function busy(): Promise<void> {
  for (let turn = 0; turn < 300; turn++) {
    for (let i = 0; i < 1000; i++) process.nextTick(noop);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

async function work(): Promise<void> {
  await busy();
  for (let quiet = 0; quiet < 2; quiet++) {
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
    gc!();
    gc!();
    await busy();
  }
  process.stdout.write('done\n');
}

if (process.argv[2] === 'runMain') {
  await runMain(async () => {
    await work();
    process.exit(0);
  });
} else {
  await work();
}
