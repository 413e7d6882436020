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
});
