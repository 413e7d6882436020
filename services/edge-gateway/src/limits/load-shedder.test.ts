import { describe, expect, it } from 'vitest';
import { LoadShedder } from './load-shedder';

describe('LoadShedder', () => {
  it('admits up to maxInFlight at once and one more after one is done', () => {
    const s = new LoadShedder({ maxInFlight: 2, maxEventLoopDelayMs: 0 });
    expect([s.shed(), s.shed(), s.shed()]).toEqual([undefined, undefined, 'in_flight']);
    s.done();
    expect(s.shed()).toBeUndefined();
    expect(s.current.inFlight).toBe(2);
    s.close();
  });

  it('sheds while the sampled event-loop delay is over its bound, and admits again once it is under', () => {
    const s = new LoadShedder({ maxInFlight: 100, maxEventLoopDelayMs: 200 });
    s.judge(250);
    expect(s.shed()).toBe('event_loop_delay');
    expect(s.current).toMatchObject({ inFlight: 0, eventLoopDelayMs: 250, lagging: true });
    s.judge(150);
    expect(s.shed()).toBeUndefined();
    s.close();
  });

  it('with the delay check off (0), never sheds on delay', () => {
    const s = new LoadShedder({ maxInFlight: 100, maxEventLoopDelayMs: 0 });
    s.judge(60_000);
    expect(s.shed()).toBeUndefined();
    s.close();
  });

  it('notices a blocked event loop on its own', async () => {
    const s = new LoadShedder({ maxInFlight: 100, maxEventLoopDelayMs: 50, sampleMs: 20 });
    const seen: boolean[] = [];
    const judge = s.judge.bind(s);
    s.judge = (ms: number) => {
      judge(ms);
      seen.push(s.current.lagging);
    };
    await new Promise((r) => setTimeout(r, 50));
    await new Promise<void>((r) =>
      setTimeout(() => {
        const until = Date.now() + 150;
        while (Date.now() < until) {
          // block the loop: the monitor's timer runs late
        }
        r();
      }, 0),
    );
    await new Promise((r) => setTimeout(r, 100));
    s.close();
    expect(seen, 'lagging after the block, and not once it passed').toContain(true);
    expect(seen.at(-1)).toBe(false);
  });
});
