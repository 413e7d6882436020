import { describe, expect, it } from 'vitest';
import { flushAtEndOfTick } from './tick-flush';

const endOfTick = () => new Promise<void>((resolve) => process.nextTick(resolve));

describe('flushAtEndOfTick', () => {
  it('flushes every holder once, in order, after the current tick', async () => {
    const seen: string[] = [];
    flushAtEndOfTick({ flushTick: () => seen.push('a') });
    flushAtEndOfTick({ flushTick: () => seen.push('b') });
    expect(seen).toEqual([]);
    await endOfTick();
    expect(seen).toEqual(['a', 'b']);
    flushAtEndOfTick({ flushTick: () => seen.push('c') });
    await endOfTick();
    expect(seen).toEqual(['a', 'b', 'c']);
  });

  it('flushes a holder added during the pass in the same pass', async () => {
    const seen: string[] = [];
    flushAtEndOfTick({
      flushTick: () => {
        seen.push('first');
        flushAtEndOfTick({ flushTick: () => seen.push('joined') });
      },
    });
    await endOfTick();
    expect(seen).toEqual(['first', 'joined']);
  });

  it('still flushes the others when one throws, and the error goes on', async () => {
    const seen: string[] = [];
    const errors: unknown[] = [];
    const listeners = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', (err) => errors.push(err));
    try {
      flushAtEndOfTick({ flushTick: () => seen.push('before') });
      flushAtEndOfTick({
        flushTick: () => {
          throw new Error('bug');
        },
      });
      flushAtEndOfTick({ flushTick: () => seen.push('after') });
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.removeAllListeners('uncaughtException');
      for (const l of listeners) process.on('uncaughtException', l);
    }
    expect(seen).toEqual(['before', 'after']);
    expect(errors).toHaveLength(1);
    flushAtEndOfTick({ flushTick: () => seen.push('next tick') });
    await endOfTick();
    expect(seen.at(-1)).toBe('next tick');
  });
});
