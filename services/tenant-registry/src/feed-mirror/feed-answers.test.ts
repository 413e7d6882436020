import { createLogger, ManualClock } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import type { FeedPage, FeedStore } from '../store/feed-store';
import { FeedAnswers } from './feed-answers';
import type { FeedMirror } from './feed-mirror';

const logger = createLogger({ service: 'test', level: 'silent' });

function setup() {
  const clock = new ManualClock(1_000_000);
  const calls = { database: 0, mirror: 0, progress: 0 };
  let databaseUp = true;
  let mirrorHolds = true;
  const feed = {
    recordAndRead: async (): Promise<FeedPage> => {
      calls.database++;
      if (!databaseUp) throw new Error('connect ECONNREFUSED');
      return { latestSeq: 7, changes: [], reset: false };
    },
  } as unknown as FeedStore;
  const mirror = {
    read: async () => {
      calls.mirror++;
      return mirrorHolds ? { latestSeq: 7, changes: [], reset: false, granted: true } : undefined;
    },
  } as unknown as FeedMirror;
  const answers = new FeedAnswers(feed, mirror, () => calls.progress++, logger, clock);
  const ask = () => answers.changesSince('c1', 'realtime', 7, 2000, 100);
  return { clock, calls, answers, ask, setDatabase: (up: boolean) => (databaseUp = up), setMirror: (holds: boolean) => (mirrorHolds = holds) };
}

describe('FeedAnswers', () => {
  it('answers from PostgreSQL (recording the report), from the mirror once it fails, and tries PostgreSQL again a second later', async () => {
    const { clock, calls, ask, setDatabase } = setup();
    expect(await ask()).toMatchObject({ source: 'database', latestSeq: 7 });
    expect(calls.progress).toBe(1);
    setDatabase(false);
    expect(await ask()).toMatchObject({ source: 'mirror', latestSeq: 7 });
    // Within the second: straight to the mirror, PostgreSQL not waited on.
    const before = calls.database;
    expect((await ask()).source).toBe('mirror');
    expect(calls.database).toBe(before);
    setDatabase(true);
    clock.advance(1000);
    expect((await ask()).source).toBe('database');
  });

  it('fails unavailable when PostgreSQL fails and the mirror holds nothing', async () => {
    const { ask, setDatabase, setMirror } = setup();
    setDatabase(false);
    setMirror(false);
    await expect(ask()).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('without a mirror (the embedded default) a database failure is the answer', async () => {
    const feed = { recordAndRead: async () => Promise.reject(new Error('down')) } as unknown as FeedStore;
    const answers = new FeedAnswers(feed, undefined, () => {}, logger);
    await expect(answers.changesSince('c', 'realtime', 1, 2000, 10)).rejects.toThrow('down');
  });
});
