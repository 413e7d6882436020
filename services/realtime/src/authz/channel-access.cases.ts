import type { ChannelAction } from '@service-relay/channels';

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

/** A tenant's channel rules as the operator writes them (the admin API's body). */
export interface RulesDoc {
  default?: string[];
  channels?: Array<{ pattern: string; actions: string[]; presence?: boolean }>;
}

export interface AccessCase {
  name: string;
  /** The tenant's rules; undefined: the default rules (nothing set). */
  rules?: RulesDoc;
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

/**
 * An operator's rules: most channels read-only by default, chat open, one
 * exact channel and one longer prefix narrowing the chat wildcard, a locked
 * channel, private channels narrowed, presence on presence:*.
 */
export const TENANT_RULES: RulesDoc = {
  default: ['subscribe', 'history'],
  channels: [
    { pattern: 'chat:*', actions: ['subscribe', 'publish', 'history'] },
    { pattern: 'chat:announcements', actions: ['subscribe', 'history'] },
    { pattern: 'chat:ops*', actions: ['subscribe'] },
    { pattern: 'chat:ops-open', actions: ['subscribe', 'publish'] },
    { pattern: 'locked', actions: [] },
    { pattern: 'user:*', actions: ['subscribe', 'history'] },
    { pattern: 'dm:*', actions: ['subscribe', 'publish'] },
    { pattern: 'presence:*', actions: ['subscribe', 'publish', 'presence'], presence: true },
  ],
};
const NOTHING: RulesDoc = { default: [] };
const EMPTY_DOC: RulesDoc = {};

const ruleRow = (name: string, rules: RulesDoc, cap: CapClaim, userId: string, channel: string, action: ChannelAction, expected: 'allow' | 'deny'): AccessCase => ({
  ...row(`rules: ${name}`, cap, userId, channel, action, expected),
  rules,
});

/** Rows decided with a tenant's rules (the unit, REST and WebSocket tests run them like the rest). */
const RULE_CASES: readonly AccessCase[] = [
  // Specificity: an exact name beats every wildcard; a longer prefix beats a shorter one.
  ruleRow('wildcard rule lists publish', TENANT_RULES, undefined, ALICE, 'chat:room-1', 'publish', 'allow'),
  ruleRow('wildcard rule lists history', TENANT_RULES, undefined, ALICE, 'chat:room-1', 'history', 'allow'),
  ruleRow('exact rule beats the wildcard (publish not listed)', TENANT_RULES, undefined, ALICE, 'chat:announcements', 'publish', 'deny'),
  ruleRow('exact rule allows what it lists', TENANT_RULES, undefined, ALICE, 'chat:announcements', 'subscribe', 'allow'),
  ruleRow('longer prefix beats the shorter one', TENANT_RULES, undefined, ALICE, 'chat:ops-1', 'publish', 'deny'),
  ruleRow('longer prefix allows what it lists', TENANT_RULES, undefined, ALICE, 'chat:ops-1', 'subscribe', 'allow'),
  ruleRow('exact rule beats a longer prefix', TENANT_RULES, undefined, ALICE, 'chat:ops-open', 'publish', 'allow'),
  ruleRow('the name without the wildcard part is not matched (default applies)', TENANT_RULES, undefined, ALICE, 'chat', 'publish', 'deny'),
  ruleRow('matching is case-sensitive (default applies)', TENANT_RULES, undefined, ALICE, 'CHAT:room-1', 'publish', 'deny'),
  // No rule matches: the document's default.
  ruleRow('default allows subscribe', TENANT_RULES, undefined, ALICE, 'news', 'subscribe', 'allow'),
  ruleRow('default allows history', TENANT_RULES, undefined, ALICE, 'news', 'history', 'allow'),
  ruleRow('default refuses publish', TENANT_RULES, undefined, ALICE, 'news', 'publish', 'deny'),
  ruleRow('a rule with no actions refuses subscribe', TENANT_RULES, undefined, ALICE, 'locked', 'subscribe', 'deny'),
  ruleRow('a rule with no actions refuses history', TENANT_RULES, undefined, ALICE, 'locked', 'history', 'deny'),
  ruleRow('an empty default refuses every channel', NOTHING, undefined, ALICE, 'news', 'subscribe', 'deny'),
  ruleRow('an empty default refuses publish', NOTHING, undefined, ALICE, 'chat:room-1', 'publish', 'deny'),
  ruleRow('an empty document means every action (the default default)', EMPTY_DOC, undefined, ALICE, 'news', 'publish', 'allow'),
  ruleRow('an empty document has no presence:* rule, still allowed by default', EMPTY_DOC, undefined, ALICE, 'presence:lobby', 'subscribe', 'allow'),
  // Rules are an upper bound; a cap narrows them and never widens them.
  ruleRow('cap and rules both allow', TENANT_RULES, { 'chat:*': ['subscribe', 'publish'] }, ALICE, 'chat:room-1', 'publish', 'allow'),
  ruleRow('cap cannot widen the rules (publish on a default channel)', TENANT_RULES, { 'news*': ['subscribe', 'publish'] }, ALICE, 'news', 'publish', 'deny'),
  ruleRow('cap cannot widen an exact rule', TENANT_RULES, { 'chat:*': ['publish'] }, ALICE, 'chat:announcements', 'publish', 'deny'),
  ruleRow('cap narrows what the rules allow (action not in cap)', TENANT_RULES, { 'chat:*': ['subscribe'] }, ALICE, 'chat:room-1', 'publish', 'deny'),
  ruleRow('cap narrows what the rules allow (no pattern)', TENANT_RULES, { 'orders.*': ['subscribe'] }, ALICE, 'news', 'subscribe', 'deny'),
  ruleRow('cap cannot open a locked channel', TENANT_RULES, { locked: ['subscribe', 'history'] }, ALICE, 'locked', 'history', 'deny'),
  // Private channels: the private rule, the tenant's rules and the cap must all allow.
  ruleRow('own user channel, the rule lists subscribe', TENANT_RULES, undefined, ALICE, `user:${ALICE}`, 'subscribe', 'allow'),
  ruleRow('own user channel, the rule narrows the owner (publish)', TENANT_RULES, undefined, ALICE, `user:${ALICE}`, 'publish', 'deny'),
  ruleRow('another user\'s channel stays private under a rule that lists subscribe', TENANT_RULES, undefined, BOB, `user:${ALICE}`, 'subscribe', 'deny'),
  ruleRow('another user\'s channel stays private for history', TENANT_RULES, undefined, BOB, `user:${ALICE}`, 'history', 'deny'),
  ruleRow('dm member, publish listed', TENANT_RULES, undefined, BOB, `dm:${ALICE}:${BOB}`, 'publish', 'allow'),
  ruleRow('dm member, history not listed', TENANT_RULES, undefined, BOB, `dm:${ALICE}:${BOB}`, 'history', 'deny'),
  ruleRow('dm non-member under a rule that lists subscribe', TENANT_RULES, undefined, CAROL, `dm:${ALICE}:${BOB}`, 'subscribe', 'deny'),
  ruleRow('a malformed private name stays nobody\'s', TENANT_RULES, undefined, ALICE, 'user:alice', 'subscribe', 'deny'),
  ruleRow('an empty default refuses the owner\'s own user channel', NOTHING, undefined, ALICE, `user:${ALICE}`, 'subscribe', 'deny'),
  // The presence action (decided here; presence itself reads the rule's presence flag).
  ruleRow('presence listed on presence:*', TENANT_RULES, undefined, ALICE, 'presence:lobby', 'presence', 'allow'),
  ruleRow('presence not listed on chat:*', TENANT_RULES, undefined, ALICE, 'chat:room-1', 'presence', 'deny'),
  ruleRow('presence subscribe on presence:*', TENANT_RULES, undefined, ALICE, 'presence:lobby', 'subscribe', 'allow'),
];

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
  // Seeing presence members (the presence request, the REST list, join/leave frames).
  row('presence: no cap, default rules', undefined, ALICE, 'presence:lobby', 'presence', 'allow'),
  row('presence: cap lists presence for the channel', ORDERS_READ, ALICE, 'chat:room-1', 'presence', 'allow'),
  row('presence: cap without presence for the channel', ORDERS_READ, ALICE, 'orders.eu', 'presence', 'deny'),
  row('presence: cap with no pattern for the channel', ORDERS_READ, ALICE, 'presence:lobby', 'presence', 'deny'),
  row('presence: another user\u2019s private channel', undefined, ALICE, `user:${BOB}`, 'presence', 'deny'),
  ...RULE_CASES,
];

/** Whether subscribers are presence members (the rule's `presence` flag), by tenant rules; undefined rules: the default. */
export const PRESENCE_CASES: ReadonlyArray<{ name: string; rules?: RulesDoc; channel: string; expected: boolean }> = [
  { name: 'default rules: presence:* channels', channel: 'presence:lobby', expected: true },
  { name: 'default rules: other channels', channel: 'chat:room-1', expected: false },
  { name: 'a rule with presence: true', rules: TENANT_RULES, channel: 'presence:room', expected: true },
  { name: 'a rule without presence', rules: TENANT_RULES, channel: 'chat:room-1', expected: false },
  { name: 'no rule matches: never presence', rules: TENANT_RULES, channel: 'news', expected: false },
  { name: 'the operator dropped the presence:* rule', rules: EMPTY_DOC, channel: 'presence:lobby', expected: false },
  { name: 'the most specific rule decides presence too', rules: { channels: [{ pattern: 'room:*', actions: ['subscribe'], presence: true }, { pattern: 'room:quiet', actions: ['subscribe'] }] }, channel: 'room:quiet', expected: false },
];
