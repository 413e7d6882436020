import { randomUUID } from 'node:crypto';
import { createLogger, RelayError } from '@service-relay/core';
import { DEFAULT_CHANNEL_RULES, parseChannelRules, type ChannelRules } from '@service-relay/channels';
import { ManualTenantFeed } from '@service-relay/tenant-events';
import { beforeEach, describe, expect, it } from 'vitest';
import { ChannelRulesCache } from './channel-rules-cache';
import type { ChannelRulesSource, FetchedChannelRules } from './channel-rules-source';

const parse = (doc: unknown): ChannelRules => parseChannelRules(doc) as ChannelRules;
const V1 = parse({ default: ['subscribe'] });
const V2 = parse({ default: ['history'] });
const V3 = parse({ default: [] });
const docOf = (r: ChannelRules) => ({ default: [...r.default], channels: [] });

/** A registry whose answers the test hands out one by one. */
class ScriptedSource implements ChannelRulesSource {
  readonly asked: Array<{ tenantId: string; answer(a: FetchedChannelRules | undefined): void; fail(err: Error): void }> = [];
  fetch(tenantId: string): Promise<FetchedChannelRules | undefined> {
    return new Promise((resolve, reject) => this.asked.push({ tenantId, answer: resolve, fail: reject }));
  }
  /** Answers the oldest open question once it has been asked. */
  async next(): Promise<ScriptedSource['asked'][number]> {
    for (let i = 0; i < 100 && this.asked.length === 0; i++) await new Promise((r) => setImmediate(r));
    const q = this.asked.shift();
    if (!q) throw new Error('nothing was asked');
    return q;
  }
  close(): void {}
}

describe('ChannelRulesCache', () => {
  let feed: ManualTenantFeed;
  let source: ScriptedSource;
  let cache: ChannelRulesCache;
  const logs: string[] = [];
  const tenant = randomUUID();
  const change = (tenantId: string, rules: ChannelRules, version: number, seq?: number) =>
    feed.push({ tenant_id: tenantId, kind: 'channel_rules', version: 1, revoked_key_versions: [], detail: { rules: docOf(rules), rules_version: version }, ...(seq !== undefined && { seq }) });

  beforeEach(() => {
    feed = new ManualTenantFeed();
    source = new ScriptedSource();
    cache = new ChannelRulesCache({ source, feed, logger: createLogger({ service: 'test', level: 'debug', destination: { write: (l: string) => void logs.push(l) } }) });
    feed.subscribe((e) => cache.onEvent(e));
    feed.onReset(() => cache.onReset());
  });

  it('asks the registry once on first use (callers meanwhile share the question), then answers synchronously', async () => {
    const first = cache.lookup(tenant);
    const second = cache.lookup(tenant);
    expect(first).toBeInstanceOf(Promise);
    (await source.next()).answer({ rules: V1, version: 1, asOfSeq: 0 });
    expect(await first).toBe(V1);
    expect(await second).toBe(V1);
    expect(source.asked).toHaveLength(0);
    expect(cache.lookup(tenant)).toBe(V1);
  });

  it('takes a feed change when its version is newer than what it holds, and ignores an older one', async () => {
    await change(tenant, V2, 2);
    expect(cache.lookup(tenant)).toEqual(V2);
    await change(tenant, V1, 1);
    expect(cache.lookup(tenant)).toEqual(V2);
    await change(tenant, V3, 3);
    expect(cache.lookup(tenant)).toEqual(V3);
    await feed.push({ tenant_id: tenant, kind: 'rotated', version: 2, revoked_key_versions: [] });
    expect(cache.lookup(tenant)).toEqual(V3);
    expect(source.asked).toHaveLength(0);
  });

  it('keeps the highest version: a slow first-use answer cannot overwrite a newer feed change', async () => {
    const pending = cache.lookup(tenant);
    const question = await source.next();
    await change(tenant, V2, 2, 10);
    question.answer({ rules: V1, version: 1, asOfSeq: 10 });
    expect(await pending).toEqual(V2);
    expect(cache.lookup(tenant)).toEqual(V2);
  });

  it('asks again when an answer was read before a rules change it applied (the entry may have been evicted), then gives up closed', async () => {
    const other = randomUUID();
    await change(other, V2, 1, 20);
    const pending = cache.lookup(tenant);
    (await source.next()).answer({ rules: V1, version: 1, asOfSeq: 19 });
    (await source.next()).answer({ rules: V3, version: 2, asOfSeq: 20 });
    expect(await pending).toBe(V3);

    const lagging = cache.lookup(randomUUID());
    for (let i = 0; i < 3; i++) (await source.next()).answer({ rules: V1, version: 1, asOfSeq: 5 });
    await expect(lagging).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('fails closed: a registry that cannot answer, or does not know the tenant, is unavailable, and nothing is cached', async () => {
    const failing = cache.lookup(tenant);
    (await source.next()).fail(new Error('UNAVAILABLE: connect refused'));
    const err = await (failing as Promise<ChannelRules>).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RelayError);
    expect(err).toMatchObject({ code: 'unavailable' });
    const unknown = cache.lookup(tenant);
    (await source.next()).answer(undefined);
    await expect(unknown).rejects.toMatchObject({ code: 'unavailable' });
    expect(cache.size).toBe(0);
    expect(logs.join('')).toContain('channel rules not available; refusing the request');
  });

  it('trusts nothing it holds while the feed is not current: every lookup asks the registry', async () => {
    await change(tenant, V1, 1);
    feed.setCurrent(false);
    const asked = cache.lookup(tenant);
    expect(asked).toBeInstanceOf(Promise);
    (await source.next()).answer({ rules: V2, version: 2, asOfSeq: 100 });
    expect(await asked).toEqual(V2);
    feed.setCurrent(true);
    expect(cache.lookup(tenant)).toEqual(V2);
  });

  it("drops everything on a feed reset, and refuses answers from before the feed's new base", async () => {
    await change(tenant, V1, 1, 5);
    await feed.reset(50);
    const pending = cache.lookup(tenant);
    expect(pending).toBeInstanceOf(Promise);
    (await source.next()).answer({ rules: V1, version: 1, asOfSeq: 49 });
    (await source.next()).answer({ rules: V2, version: 2, asOfSeq: 50 });
    expect(await pending).toEqual(V2);
  });

  it('refuses an unreadable feed change (the feed stops there and the instance stops trusting its caches)', async () => {
    await expect(feed.push({ tenant_id: tenant, kind: 'channel_rules', version: 1, revoked_key_versions: [], detail: { rules: { default: ['admin'] }, rules_version: 1 } })).rejects.toThrow(/unreadable/);
    await expect(feed.push({ tenant_id: tenant, kind: 'channel_rules', version: 1, revoked_key_versions: [], detail: { rules: docOf(V1) } })).rejects.toThrow(/unreadable/);
    expect(cache.size).toBe(0);
  });

  it('keeps a bounded number of tenants', async () => {
    const small = new ChannelRulesCache({ source, feed, logger: createLogger({ service: 'test', level: 'silent' }), max: 2 });
    for (let i = 0; i < 5; i++) small.onEvent({ seq: i + 1, tenant_id: randomUUID(), kind: 'channel_rules', version: 1, revoked_key_versions: [], detail: { rules: docOf(DEFAULT_CHANNEL_RULES), rules_version: 1 } });
    expect(small.size).toBe(2);
  });
});
