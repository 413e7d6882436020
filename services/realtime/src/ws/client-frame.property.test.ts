import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseClientFrame, replyFrame } from './client-frame';

// Property-based tests of the WebSocket frame parser: any text is either a
// well-formed frame or invalid_frame, never an exception.
const config = { seed: 0x6a7e_0003, numRuns: 500 };

const anyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.json({ maxDepth: 4 }),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'),
  fc.integer({ min: 1, max: 5000 }).map((n) => `{"type":"publish","topic":"t","data":${'['.repeat(n)}${']'.repeat(n)}}`),
  fc.integer({ min: 1, max: 5000 }).map((n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)),
);
const frameLike = fc
  .record(
    {
      type: fc.constantFrom('subscribe', 'unsubscribe', 'publish', 'auth', 'Subscribe', '', 'dance', 1, null),
      topic: fc.oneof(fc.string(), fc.constant(null), fc.integer()),
      after: fc.oneof(fc.constantFrom('0-0', '1-1', '123456789012345-1', '1234567890123456-1', '-1-0', '1-', '', '0x1-0'), fc.string(), fc.constant(null), fc.integer()),
      epoch: fc.oneof(fc.constantFrom('', 'a'.repeat(64), 'a'.repeat(65), 'ab/cd'), fc.string(), fc.constant(null)),
      data: fc.jsonValue({ maxDepth: 3 }),
      token: fc.oneof(fc.string(), fc.constant(''), fc.integer()),
      ref: fc.oneof(fc.string(), fc.integer(), fc.double(), fc.constant(null), fc.array(fc.integer(), { maxLength: 2 })),
      idempotency_key: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
    },
    { requiredKeys: [] },
  )
  .map((o) => JSON.stringify(o));

describe('parseClientFrame under arbitrary input', () => {
  it('never throws; accepted frames have the declared shape, refused ones echo only a usable ref', () => {
    fc.assert(
      fc.property(fc.oneof(anyText, frameLike), (text) => {
        const parsed = parseClientFrame(text);
        if (!parsed.ok) {
          expect(parsed.ref === undefined || typeof parsed.ref === 'string' || (typeof parsed.ref === 'number' && Number.isFinite(parsed.ref))).toBe(true);
          // The reply frame of a refusal is always serializable.
          expect(() => JSON.parse(replyFrame({ type: 'error', code: 'invalid_frame' }, parsed.ref))).not.toThrow();
          return;
        }
        const f = parsed.frame;
        expect(['subscribe', 'unsubscribe', 'publish', 'auth']).toContain(f.type);
        if (f.type === 'subscribe') {
          if (f.after !== undefined) expect(f.after).toMatch(/^\d{1,15}-\d{1,15}$/);
          if (f.epoch !== undefined) expect(f.epoch).toMatch(/^[A-Za-z0-9_-]{0,64}$/);
        }
        if (f.type === 'auth') expect(typeof f.token === 'string' && f.token.length > 0).toBe(true);
        if (f.ref !== undefined) expect(typeof f.ref === 'string' || Number.isFinite(f.ref)).toBe(true);
      }),
      config,
    );
  });
});
