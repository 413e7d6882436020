import { describe, expect, it } from 'vitest';
import { decodeChannel } from './channel-name';

describe('decodeChannel', () => {
  it.each([
    ['chat', 'chat'],
    ['orders.eu:42_a-b', 'orders.eu:42_a-b'],
    ['chat%3Aroom', 'chat:room'],
    ['a'.repeat(128), 'a'.repeat(128)],
    ['a'.repeat(129), undefined],
    ['', undefined],
    ['chat%2Froom', undefined],
    ['with%20space', undefined],
    ['%E0%A4%A', undefined],
    ['caf%C3%A9', undefined],
  ])('%s -> %s', (segment, expected) => {
    expect(decodeChannel(segment)).toBe(expected);
  });
});
