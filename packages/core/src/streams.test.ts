import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { skipRepeatedEnd } from './streams';

const sink = () => new Writable({ write: (_chunk, _enc, cb) => cb() });
const finished = (w: Writable) => new Promise<void>((resolve) => w.once('finish', () => resolve()));

describe('skipRepeatedEnd', () => {
  it('leaves the first end() as Node has it: the stream finishes', async () => {
    const w = sink();
    skipRepeatedEnd(w);
    const done = finished(w);
    expect(w.end()).toBe(w);
    await done;
    expect(w.writableFinished).toBe(true);
  });

  it('a bare end() on a finished stream returns the stream and emits nothing', async () => {
    const w = sink();
    skipRepeatedEnd(w);
    const errors: Error[] = [];
    w.on('error', (e) => errors.push(e));
    const done = finished(w);
    w.end();
    await done;
    expect(w.end()).toBe(w);
    expect(w.end()).toBe(w);
    await new Promise((r) => setImmediate(r));
    expect(errors).toEqual([]);
  });

  it('a bare end() on an ended, destroyed stream returns the stream', () => {
    const w = new PassThrough();
    skipRepeatedEnd(w);
    w.end();
    w.destroy();
    expect(w.end()).toBe(w);
  });

  it('keeps what a caller can see: a callback still gets the error, a chunk after the end still fails', async () => {
    const w = sink();
    skipRepeatedEnd(w);
    const done = finished(w);
    w.end();
    await done;
    const err = await new Promise<Error | null | undefined>((resolve) => w.end((e?: Error | null) => resolve(e)));
    expect((err as NodeJS.ErrnoException | null)?.code).toBe('ERR_STREAM_ALREADY_FINISHED');
    const late = await new Promise<Error | null | undefined>((resolve) => w.end('late', (e?: Error | null) => resolve(e)));
    expect((late as NodeJS.ErrnoException | null)?.code).toBe('ERR_STREAM_WRITE_AFTER_END');
  });

  it('a stream not yet over ends normally, with its callback', async () => {
    const w = sink();
    skipRepeatedEnd(w);
    await new Promise<void>((resolve) => w.end('last', () => resolve()));
    expect(w.writableFinished).toBe(true);
  });
});
