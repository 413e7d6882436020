import { makeRow } from '../lib/result-schema';
import { rotate, sleep, withWorkers, type Scenario } from '../lib/scenario';
import type { TenantKey } from '../lib/tokens';
import { watchCpu } from '../lib/workers';

const ROW = { name: 'channel_rules_ratio', unit: 'msgs/s', baselineName: 'same realtime, default rules, no cap', target: 0.95 };
const SUBSCRIBERS = 10;
const MESSAGE_BYTES = 100;
const WINDOW = 32;
const CHANNEL = 'bench-rules.lobby';

/**
 * A realistic operator document: 50 rules (exact rooms, team and region
 * prefixes of several lengths, a locked channel) where the bench channel
 * matches a short wildcard, so the most-specific match scans past every
 * longer rule first (exact names, then longer prefixes).
 */
export function realisticRules(): { default: string[]; channels: Array<{ pattern: string; actions: string[]; presence?: boolean }> } {
  const channels: Array<{ pattern: string; actions: string[]; presence?: boolean }> = [];
  for (let i = 0; i < 20; i++) channels.push({ pattern: `room-${String(i).padStart(2, '0')}`, actions: ['subscribe', 'publish', 'history'] });
  for (let i = 0; i < 15; i++) channels.push({ pattern: `team-${String(i).padStart(2, '0')}.chat:*`, actions: ['subscribe', 'publish'] });
  for (let i = 0; i < 10; i++) channels.push({ pattern: `region.eu-${i}.orders.*`, actions: ['subscribe', 'history'] });
  channels.push({ pattern: 'announcements', actions: ['subscribe', 'history'] });
  channels.push({ pattern: 'locked', actions: [] });
  channels.push({ pattern: 'presence:*', actions: ['subscribe', 'publish', 'presence'], presence: true });
  channels.push({ pattern: 'audit.*', actions: ['history'] });
  channels.push({ pattern: 'bench-*', actions: ['subscribe', 'publish', 'history'] });
  return { default: ['subscribe', 'history'], channels };
}

/** A cap as a host would sign it: a handful of patterns, the matching one sorted last. */
const CAP: Record<string, string[]> = {
  'announcements': ['subscribe', 'history'],
  'audit.*': ['history'],
  'presence:*': ['subscribe', 'presence'],
  'room-0*': ['subscribe', 'publish'],
  'team-01.chat:*': ['subscribe', 'publish'],
  'bench-*': ['subscribe', 'publish'],
};

/**
 * Publish throughput with a tenant's channel rules active (50 rules) and a
 * `cap` claim on every token, against the same realtime process deciding for
 * a tenant with the default rules and no cap: the cost of the decision on the
 * hot path (each publish), with delivery to a few subscribers so the publish
 * side dominates. Same worker, same publisher and window, in turns.
 */
export const channelRules: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const plain = await stack.createTenant();
      const ruled: TenantKey = { ...(await stack.createTenant()), cap: CAP };
      const res = await fetch(`${stack.registryHttp}/admin/tenants/${ruled.tenantId}/channel_rules`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(realisticRules()),
      });
      if (res.status !== 200) throw new Error(`setting the bench tenant's channel rules: ${res.status} ${await res.text()}`);
      const [publisher, subscribers] = await Promise.all([spawn('ws-clients', { label: 'publisher' }), spawn('ws-clients', { label: 'subscribers' })]);
      const sides = { rules: ruled, default: plain } as const;
      const topicOf = (k: TenantKey) => `tenants/${k.tenantId}/channels/${CHANNEL}`;
      for (const [group, key] of Object.entries(sides)) {
        const opened = await subscribers.call<{ opened: number; firstError?: string }>('open', { group, variant: 'relay', base: stack.realtimeWs, count: SUBSCRIBERS, concurrency: 10, level: 'subscribed', topic: topicOf(key), key });
        if (opened.opened < SUBSCRIBERS) throw new Error(`${group}: only ${opened.opened} subscribers (${opened.firstError})`);
      }
      const count = (group: string) => subscribers.call<{ delivered: number; atMs: number }>('count', { group });
      const figures: Record<keyof typeof sides, number[]> = { rules: [], default: [] };
      let busiest: string | undefined;
      let baselineBusiest: string | undefined;
      const start = (side: keyof typeof sides) =>
        publisher.call('publishStart', { group: side, variant: 'relay', base: stack.realtimeWs, topic: topicOf(sides[side]), window: WINDOW, bytes: MESSAGE_BYTES, key: sides[side] });
      // Both sides warm before either is measured: measured cold, the first side lost up to half its rate to JIT warm-up.
      for (const side of ['rules', 'default'] as const) {
        await start(side);
        await sleep(Math.max(1, budget.warmupSeconds) * 1000);
        await publisher.call('publishStop', { group: side });
      }
      // At least two rounds (A B, then B A) even in --quick: one round measured both sides at different moments of a drifting machine.
      const rounds = Math.max(2, budget.runs);
      for (let round = 0; round < rounds; round++) {
        for (const side of rotate(['rules', 'default'] as const, round)) {
          await start(side);
          await sleep(500);
          const cpu = await watchCpu([stack.workers.realtime, subscribers, publisher]);
          const before = await count(side);
          await sleep(budget.seconds * 1000);
          const after = await count(side);
          const limited = await cpu();
          await publisher.call('publishStop', { group: side });
          figures[side].push(((after.delivered - before.delivered) / (after.atMs - before.atMs)) * 1000);
          if (side === 'rules') busiest = limited;
          else baselineBusiest = limited;
        }
      }
      const note = `50 rules (match on a short wildcard after every longer rule), a 6-pattern cap on every token; ${SUBSCRIBERS} subscribers, ${MESSAGE_BYTES}-byte data, window ${WINDOW}`;
      return [makeRow({ ...ROW, ours: figures.rules, baseline: figures.default, quick: budget.quick, limitedBy: busiest, baselineLimitedBy: baselineBusiest, note })];
    }),
};
