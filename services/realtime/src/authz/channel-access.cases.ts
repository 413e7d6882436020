import type { ChannelAction } from '@service-relay/core';

/**
 * The channel-authorization table (issue #13): the pure decision's unit test
 * runs every row, the REST and WebSocket tests run the same rows end to end.
 * Users are fixed so that their order is known: ALICE < BOB < CAROL.
 */
export const ALICE = '11111111-1111-4111-8111-111111111111';
export const BOB = '22222222-2222-4222-8222-222222222222';
export const CAROL = '33333333-3333-4333-8333-333333333333';

/** The claim as a host writes it (the JSON value of `cap`), or undefined for no claim. */
export type CapClaim = Record<string, string[]> | undefined;

export interface AccessCase {
  name: string;
  cap: CapClaim;
  userId: string;
  channel: string;
  action: ChannelAction;
  expected: 'allow' | 'deny';
}

const ORDERS_READ: CapClaim = { 'orders.*': ['subscribe', 'history'], 'chat:*': ['subscribe', 'publish', 'presence'] };
const EXACT: CapClaim = { lobby: ['subscribe', 'publish', 'history'] };
const USERS: CapClaim = { 'user:*': ['subscribe'], 'dm:*': ['subscribe', 'publish', 'history'] };

const row = (name: string, cap: CapClaim, userId: string, channel: string, action: ChannelAction, expected: 'allow' | 'deny'): AccessCase => ({
  name,
  cap,
  userId,
  channel,
  action,
  expected,
});

export const ACCESS_CASES: readonly AccessCase[] = [
  // No claim: every public channel, every action (behaviour before #13).
  row('no cap: public channel, subscribe', undefined, ALICE, 'orders.eu', 'subscribe', 'allow'),
  row('no cap: public channel, publish', undefined, ALICE, 'anything-at_all:1', 'publish', 'allow'),
  row('no cap: public channel, history', undefined, ALICE, 'orders.eu', 'history', 'allow'),
  // Prefix wildcards.
  row('prefix: matching channel, listed action', ORDERS_READ, ALICE, 'orders.eu', 'subscribe', 'allow'),
  row('prefix: history listed', ORDERS_READ, ALICE, 'orders.eu.north', 'history', 'allow'),
  row('prefix: action not listed', ORDERS_READ, ALICE, 'orders.eu', 'publish', 'deny'),
  row('prefix: the prefix itself is a channel it matches', ORDERS_READ, ALICE, 'orders.', 'subscribe', 'allow'),
  row('prefix: the name without the dot does not match', ORDERS_READ, ALICE, 'orders', 'subscribe', 'deny'),
  row('prefix: a longer name sharing letters does not match', ORDERS_READ, ALICE, 'ordersX', 'subscribe', 'deny'),
  row('prefix: second pattern, publish listed', ORDERS_READ, ALICE, 'chat:room-1', 'publish', 'allow'),
  row('prefix: second pattern, history not listed', ORDERS_READ, ALICE, 'chat:room-1', 'history', 'deny'),
  row('prefix: matching is case-sensitive', ORDERS_READ, ALICE, 'Orders.eu', 'subscribe', 'deny'),
  row('cap: channel no pattern matches', ORDERS_READ, ALICE, 'billing', 'subscribe', 'deny'),
  // Exact patterns.
  row('exact: the channel itself', EXACT, ALICE, 'lobby', 'publish', 'allow'),
  row('exact: a longer name is not matched', EXACT, ALICE, 'lobby2', 'publish', 'deny'),
  row('exact: a shorter name is not matched', EXACT, ALICE, 'lobb', 'subscribe', 'deny'),
  row('empty cap: nothing at all', {}, ALICE, 'lobby', 'subscribe', 'deny'),
  // user:<id>
  row('user channel: the owner, no cap, subscribe', undefined, ALICE, `user:${ALICE}`, 'subscribe', 'allow'),
  row('user channel: the owner, no cap, publish', undefined, ALICE, `user:${ALICE}`, 'publish', 'allow'),
  row('user channel: the owner, no cap, history', undefined, ALICE, `user:${ALICE}`, 'history', 'allow'),
  row('user channel: owner id in upper case in the channel', undefined, ALICE, `user:${ALICE.toUpperCase()}`, 'subscribe', 'allow'),
  row('user channel: owner id in upper case in the token', undefined, ALICE.toUpperCase(), `user:${ALICE}`, 'subscribe', 'allow'),
  row('user channel: another user, no cap', undefined, BOB, `user:${ALICE}`, 'subscribe', 'deny'),
  row('user channel: another user, publish', undefined, BOB, `user:${ALICE}`, 'publish', 'deny'),
  row('user channel: another user, history', undefined, BOB, `user:${ALICE}`, 'history', 'deny'),
  row('user channel: cap user:* does not widen to another user', USERS, BOB, `user:${ALICE}`, 'subscribe', 'deny'),
  row('user channel: cap user:* for the owner', USERS, ALICE, `user:${ALICE}`, 'subscribe', 'allow'),
  row('user channel: a cap narrows the owner too (action not listed)', USERS, ALICE, `user:${ALICE}`, 'publish', 'deny'),
  row('user channel: a cap without a matching pattern narrows the owner', ORDERS_READ, ALICE, `user:${ALICE}`, 'subscribe', 'deny'),
  row('user channel: not a user id is nobody\'s', undefined, ALICE, 'user:alice', 'subscribe', 'deny'),
  row('user channel: bare prefix is nobody\'s', undefined, ALICE, 'user:', 'subscribe', 'deny'),
  row('user channel: id with a suffix is nobody\'s', undefined, ALICE, `user:${ALICE}:x`, 'subscribe', 'deny'),
  // dm:<a>:<b>[:<c>]
  row('dm: first member, no cap', undefined, ALICE, `dm:${ALICE}:${BOB}`, 'subscribe', 'allow'),
  row('dm: second member, publish', undefined, BOB, `dm:${ALICE}:${BOB}`, 'publish', 'allow'),
  row('dm: member, history', undefined, BOB, `dm:${ALICE}:${BOB}`, 'history', 'allow'),
  row('dm: a third user', undefined, CAROL, `dm:${ALICE}:${BOB}`, 'subscribe', 'deny'),
  row('dm: three members, the last', undefined, CAROL, `dm:${ALICE}:${BOB}:${CAROL}`, 'publish', 'allow'),
  row('dm: member ids in upper case', undefined, BOB, `dm:${ALICE.toUpperCase()}:${BOB.toUpperCase()}`, 'subscribe', 'allow'),
  row('dm: member in upper case in the token', undefined, BOB.toUpperCase(), `dm:${ALICE}:${BOB}`, 'subscribe', 'allow'),
  row('dm: ids not sorted is nobody\'s', undefined, ALICE, `dm:${BOB}:${ALICE}`, 'subscribe', 'deny'),
  row('dm: one member only is nobody\'s', undefined, ALICE, `dm:${ALICE}`, 'subscribe', 'deny'),
  row('dm: a repeated member is nobody\'s', undefined, ALICE, `dm:${ALICE}:${ALICE}`, 'subscribe', 'deny'),
  row('dm: a member that is not a user id is nobody\'s', undefined, ALICE, `dm:${ALICE}:bob`, 'subscribe', 'deny'),
  row('dm: cap dm:* does not widen to a non-member', USERS, CAROL, `dm:${ALICE}:${BOB}`, 'subscribe', 'deny'),
  row('dm: cap dm:* for a member', USERS, ALICE, `dm:${ALICE}:${BOB}`, 'publish', 'allow'),
  row('dm: a cap without a matching pattern narrows a member', EXACT, ALICE, `dm:${ALICE}:${BOB}`, 'subscribe', 'deny'),
  // Look-alikes of the private prefixes are ordinary channels.
  row('not private: users: prefix', undefined, ALICE, 'users:all', 'subscribe', 'allow'),
  row('not private: upper-case USER: prefix', undefined, ALICE, `USER:${BOB}`, 'subscribe', 'allow'),
];
