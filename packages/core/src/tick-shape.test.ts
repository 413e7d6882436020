import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { pinTickObjectShape } from './tick-shape';

const run = promisify(execFile);
const script = fileURLToPath(new URL('./test-support/idle-gc-main.ts', import.meta.url));

/** V8's line when it throws away nextTick's optimized code because a map it relied on was collected. */
const NEXT_TICK_DROPPED = /SharedFunctionInfo nextTick>.*for deoptimization, reason: weak objects/;

async function traceOf(mode: 'bare' | 'runMain'): Promise<string> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--trace-deopt', '--expose-gc', script, mode], { maxBuffer: 64 * 1024 * 1024, timeout: 15_000 });
  expect(stdout).toContain('done');
  return stdout;
}

describe('pinTickObjectShape', () => {
  it('holds one tick object, once', () => {
    expect(pinTickObjectShape()).toBe(true);
    expect(pinTickObjectShape()).toBe(true);
  });

  it('leaves no async hook behind: ticks still run, in order', async () => {
    pinTickObjectShape();
    const seen: number[] = [];
    await new Promise<void>((resolve) => {
      process.nextTick(() => seen.push(1));
      process.nextTick(() => {
        seen.push(2);
        resolve();
      });
    });
    expect(seen).toEqual([1, 2]);
  });

  // The control shows the test can see the failure: plain Node drops
  // nextTick's optimized code at an idle GC (and the code it makes next is slower).
  it('plain Node drops nextTick optimized code when a quiet process is collected; a service started by runMain keeps it', async () => {
    const [bare, service] = await Promise.all([traceOf('bare'), traceOf('runMain')]);
    expect(bare).toMatch(NEXT_TICK_DROPPED);
    expect(service).not.toMatch(NEXT_TICK_DROPPED);
  });
});
