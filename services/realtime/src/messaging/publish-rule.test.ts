import { describe, expect, it } from 'vitest';
import { MemoryMessageBus } from './memory-message-bus';
import { applyPublishRule, MAX_DATA_DEPTH, nestsWithin } from './publish-rule';

const ref = { tenantId: '00000000-0000-4000-8000-000000000001', channel: 'c' };
const nested = (depth: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? { a: v } : [v];
  return v;
};

describe('applyPublishRule', () => {
  const setup = (accepting = true) => {
    const messages = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 });
    return { messages, deps: { messages, acceptingPublishes: () => accepting } };
  };
  const stored = async (messages: MemoryMessageBus) => (await messages.history(ref, { limit: 10 })).messages.length;

  it.each<[string, unknown, unknown, string]>([
    ['a bad key', 'ok', 'has space', 'malformed'],
    ['a key too long', 'ok', 'k'.repeat(129), 'malformed'],
    ['a key that is not a string', 'ok', 42, 'malformed'],
    ['data nested too deep', nested(MAX_DATA_DEPTH + 1), undefined, 'malformed'],
    ['data nested 5000 deep', nested(5000), undefined, 'malformed'],
    ['data over 64 KiB', 'x'.repeat(65_535), undefined, 'payload_too_large'],
  ])('refuses %s and stores nothing', async (_, data, idempotencyKey, refusal) => {
    const { messages, deps } = setup();
    expect(await applyPublishRule(deps, { ref, userId: 'u', data, idempotencyKey })).toEqual({ ok: false, refusal });
    expect(await stored(messages)).toBe(0);
  });

  it('refuses with unavailable while the gate is closed, and stores nothing', async () => {
    const { messages, deps } = setup(false);
    expect(await applyPublishRule(deps, { ref, userId: 'u', data: 1, idempotencyKey: undefined })).toEqual({ ok: false, refusal: 'unavailable' });
    expect(await stored(messages)).toBe(0);
  });

  it('stores data at the depth limit and answers a retry with the first message', async () => {
    const { messages, deps } = setup();
    const data = nested(MAX_DATA_DEPTH);
    const key = 'Retry_1.a:b-c';
    const first = await applyPublishRule(deps, { ref, userId: 'u', data, idempotencyKey: key });
    const retry = await applyPublishRule(deps, { ref, userId: 'u', data, idempotencyKey: key });
    expect(first.ok && retry.ok && retry.message.id === first.message.id).toBe(true);
    expect(await stored(messages)).toBe(1);
  });

  it('measures depth without recursing past the bound', () => {
    expect(nestsWithin(1, 0)).toBe(true);
    expect(nestsWithin([], 0)).toBe(false);
    expect(nestsWithin({ a: [1, { b: 2 }] }, 3)).toBe(true);
    expect(nestsWithin({ a: [1, { b: [] }] }, 3)).toBe(false);
    expect(nestsWithin(nested(100_000), 64)).toBe(false);
  });
});
