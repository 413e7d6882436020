import { randomBytes } from 'node:crypto';
import { createLogger, Keyring, ManualClock, type KeyringEntry } from '@service-relay/core';
import { parseCallbackSettings, type CallbackSettings } from '@service-relay/channels';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import type { Db } from '../db/db';
import { FeedStore } from '../store/feed-store';
import { TenantStore } from '../store/tenant-store';
import { WebhookStore } from '../store/webhook-store';
import { HostSyncCheck } from '../tenants/host-sync-check';
import { WebhooksAdmin } from '../webhooks/webhooks-admin';
import { KeyringCoordinator } from './keyring-coordinator';

const K0 = randomBytes(32);
const K1 = randomBytes(32);
const K2 = randomBytes(32);
const k0 = { id: 'k0', key: K0 };
const k1 = { id: 'k1', key: K1 };
const CALLBACKS = parseCallbackSettings({ url: 'http://127.0.0.1:9/cb', subscribe: ['*'] }, false) as CallbackSettings;

/** Opens a new database each time (a PGlite directory or a PostgreSQL database), migrated. */
export interface KeyringHarness {
  open(): Promise<Db>;
  destroy(): Promise<void>;
}

/** What a host holds for one tenant: its id and host-sync credential. */
interface Held {
  tenantId: string;
  clientId: string;
  secret: string;
}

/**
 * SECRETS_KEY as a keyring (#33 item 2), on each Db driver: the start check,
 * activation only once every registry has the newest key, the background
 * re-encryption in batches (interrupted by a crash and resumed by another
 * replica), and every secret readable by every registry at every step.
 * Registered by secrets-keyring.test.ts (PGlite) and .int.test.ts (PostgreSQL).
 */
/** No tenant feed consumer runs here: every change is in force at once. */
const NO_CONSUMERS = { awaitAllInForce: async () => ({ confirmed: true, pending: [], waitedMs: 0 }) };

export function secretsKeyringContract(driver: string, makeHarness: () => Promise<KeyringHarness>): void {
  describe(`secrets keyring on ${driver}`, () => {
    const clock = new ManualClock(Date.parse('2030-01-01T00:00:00.000Z'));
    const lines: string[] = [];
    const logger = createLogger({ service: 'tenant-registry', level: 'debug', destination: { write: (s: string) => void lines.push(s) } });
    let harness: KeyringHarness;
    let db: Db;
    const held: Held[] = [];
    const running: KeyringCoordinator[] = [];

    /** A registry replica: its coordinator (joined), crypto and store. */
    const replica = async (keys: KeyringEntry[], variable = 'SECRETS_KEYS') => {
      const coordinator = new KeyringCoordinator({ db, keyring: new Keyring(keys), variable, batch: 2, logger, workSliceMs: 0, leaseMs: 300, holderExpiryMs: 2000 });
      const crypto = new TenantCrypto(coordinator.keyring, await coordinator.join());
      running.push(coordinator);
      const store = new TenantStore(db, crypto, clock);
      const webhooks = new WebhooksAdmin(new WebhookStore(db, store.feed), crypto, clock, false, NO_CONSUMERS, logger);
      return { coordinator, crypto, store, webhooks, check: new HostSyncCheck(store, crypto.hostSync) };
    };
    type Replica = Awaited<ReturnType<typeof replica>>;
    const refusal = async (keys: KeyringEntry[], variable = 'SECRETS_KEYS') => {
      try {
        await replica(keys, variable);
      } catch (err) {
        return (err as Error).message;
      }
      return 'started';
    };
    /** Tenants with callbacks and a webhook endpoint each, made by `r`. */
    const populate = async (r: Replica, n: number) => {
      for (let i = 0; i < n; i++) {
        const { tenant, hostSyncSecret } = await r.store.create();
        await r.store.rotate(tenant.tenantId);
        await r.store.callbacks.set(tenant.tenantId, CALLBACKS);
        expect(await r.webhooks.create(tenant.tenantId, { url: 'https://hooks.example.com/relay', events: ['channel_occupied'] })).toHaveProperty('secret');
        held.push({ tenantId: tenant.tenantId, clientId: tenant.hostSyncClientId, secret: hostSyncSecret });
      }
    };
    /** Every secret of every tenant opens on `r`, and every host-sync credential is accepted. */
    const everythingOpens = async (r: Replica) => {
      for (const h of held) {
        const keys = await r.store.getKeys(h.tenantId);
        expect(keys?.previous).not.toBeNull();
        expect((await r.store.callbacks.snapshot(h.tenantId))?.secrets).toHaveLength(1);
        const [endpoint] = await new WebhookStore(db, new FeedStore(db)).list(h.tenantId);
        expect(r.crypto.openWebhookSecret(endpoint!.endpointId, endpoint!.secret)).toMatch(/^whsec_/);
        expect(await r.check.fetchPrimary(h.tenantId, { clientId: h.clientId, secret: h.secret })).toBe(keys!.primary.secret);
      }
    };
    const status = (r: Replica) => r.coordinator.status();

    beforeAll(async () => {
      harness = await makeHarness();
      db = await harness.open();
    });
    afterAll(async () => {
      for (const c of running) await c.stop().catch(() => {});
      await db?.close();
      await harness?.destroy();
    });

    it('SECRETS_KEY alone works as before: values in the v1. format, the host-sync hash derived from k0, nothing stored', async () => {
      // What a registry that predates keyrings writes: the same format and hash.
      const legacy = new TenantStore(db, new TenantCrypto(K0), clock);
      const { tenant, hostSyncSecret } = await legacy.create();
      held.push({ tenantId: tenant.tenantId, clientId: tenant.hostSyncClientId, secret: hostSyncSecret });
      await legacy.rotate(tenant.tenantId);
      await legacy.callbacks.set(tenant.tenantId, CALLBACKS);
      await new WebhooksAdmin(new WebhookStore(db, legacy.feed), new TenantCrypto(K0), clock, false, NO_CONSUMERS, logger).create(tenant.tenantId, { url: 'https://hooks.example.com/relay', events: ['channel_occupied'] });
      const a = await replica([k0], 'SECRETS_KEY');
      await populate(a, 2);
      await everythingOpens(a);
      const [row] = await db.query<{ primary_secret: string; previous_secret: string }>('SELECT primary_secret, previous_secret FROM tenants WHERE tenant_id = $1', [held[2]!.tenantId]);
      expect(row!.primary_secret).toMatch(/^v1\./);
      expect((await db.query('SELECT host_sync_hash_key FROM secrets_keyring'))[0]).toEqual({ host_sync_hash_key: null });
      await a.coordinator.tick();
      expect(await status(a)).toMatchObject({ active_key_id: 'k0', state: 'done', secrets: { k0: 3 * 4 + 1 }, total: 13, removable_key_ids: [], configured_key_ids: ['k0'] });
      await a.coordinator.stop();
    });

    it('a new key seals only once every registry has it; meanwhile both read everything, and the old one keeps sealing', async () => {
      const a = await replica([k0], 'SECRETS_KEY');
      const b = await replica([k1, k0]);
      // b holds the lease first: it would activate k1, but a lacks it.
      expect(await b.coordinator.tick()).toBe(true);
      await a.coordinator.tick();
      const waiting = await status(b);
      expect(waiting).toMatchObject({ active_key_id: 'k0', state: 'activating', waiting_on: [a.coordinator.holder], removable_key_ids: [] });
      expect(waiting.registries.map((r) => r.registry).sort()).toEqual([a.coordinator.holder, b.coordinator.holder].sort());
      expect(b.coordinator.keyring.sealingKeyId).toBe('k0');
      await populate(b, 1);
      await everythingOpens(a);
      await everythingOpens(b);
      expect((await status(a)).secrets).toEqual({ k0: 17 });
      // a rolls to the new keyring: stop (it leaves), start with both keys.
      await a.coordinator.stop();
      const a2 = await replica([k1, k0]);
      await b.coordinator.tick();
      expect(b.coordinator.keyring.sealingKeyId).toBe('k1');
      expect(a2.coordinator.keyring.sealingKeyId).toBe('k0');
      // a2 has not seen the activation yet: what it seals now is under k0, and both still open it.
      await populate(a2, 1);
      await a2.coordinator.tick();
      expect(a2.coordinator.keyring.sealingKeyId).toBe('k1');
      await populate(a2, 1);
      await everythingOpens(a2);
      await everythingOpens(b);
      const s = await status(b);
      expect(s).toMatchObject({ active_key_id: 'k1', state: 'reencrypting', secrets: { k1: 1 + 4, k0: 16 + 4 }, total: 25, removable_key_ids: [] });
      // A registry with only the old key can no longer start: k1 seals.
      expect(await refusal([k0], 'SECRETS_KEY')).toMatch(/^configuration error: SECRETS_KEY lacks key k1, which sealed 5 stored secrets: configure it again/);
      // The re-encryption, in batches of 2 rows; b crashes midway (its lease and position stay behind).
      for (let i = 0; i < 4; i++) expect(await b.coordinator.step()).toMatchObject({ kind: 'progress' });
      const midway = await status(a2);
      expect(midway.secrets.k0).toBeGreaterThan(0);
      expect(midway.secrets.k1).toBeGreaterThan(5);
      expect(midway.reencryption.reencrypted).toBe(midway.secrets.k1! - 5);
      expect((await db.query<{ pass_after: string | null }>('SELECT pass_after FROM secrets_keyring'))[0]!.pass_after).not.toBeNull();
      await everythingOpens(a2);
      running.splice(running.indexOf(b.coordinator), 1);
      // a2 takes the lease once b's has run out, and goes on from where b stopped: nothing is re-sealed twice.
      let taken = false;
      for (let i = 0; i < 100 && !taken; i++) {
        await a2.coordinator.tick();
        taken = (await db.query<{ lease_holder: string }>('SELECT lease_holder FROM secrets_keyring'))[0]!.lease_holder === a2.coordinator.holder;
        if (!taken) await new Promise((r) => setTimeout(r, 20));
      }
      expect(taken).toBe(true);
      let last: Awaited<ReturnType<KeyringCoordinator['step']>> | undefined;
      for (let i = 0; i < 100 && last?.kind !== 'done'; i++) last = await a2.coordinator.step();
      expect(last).toEqual({ kind: 'done', newlyDone: true });
      const done = await status(a2);
      expect(done).toMatchObject({ active_key_id: 'k1', state: 'done', secrets: { k1: 25 }, total: 25, removable_key_ids: ['k0'] });
      expect(done.reencryption.reencrypted).toBe(20);
      expect(done.reencryption.done_at).not.toBeNull();
      await everythingOpens(a2);
      await a2.coordinator.stop();
    });

    it('once nothing uses the old key it can be removed; a registry lacking a key in use, or with another key under its id, refuses to start', async () => {
      const c = await replica([k1]);
      await everythingOpens(c);
      expect((await db.query<{ host_sync_hash_key: string }>('SELECT host_sync_hash_key FROM secrets_keyring'))[0]!.host_sync_hash_key).toMatch(/^v2\.k1\./);
      expect(await refusal([{ id: 'k2', key: K2 }])).toMatch(/^configuration error: SECRETS_KEYS lacks key k1, which sealed 25 stored secrets/);
      expect(await refusal([{ id: 'k1', key: K2 }])).toBe('configuration error: SECRETS_KEYS has a key k1 that does not open the secrets stored under k1: it differs from the key the other registries have under that id');
      // A newer key beside k1 starts (it seals once every registry has it).
      const d = await replica([{ id: 'k2', key: K2 }, k1]);
      await everythingOpens(d);
      // A registry whose report was lost (cut off from the database) while k2 was activated is not ready once it sees it lacks k2.
      const cutOff = await replica([k1]);
      await c.coordinator.stop();
      // Its report lost, and the one b left when it crashed expired: d alone is heard from.
      await db.query('DELETE FROM secrets_key_holders WHERE holder <> $1', [d.coordinator.holder]);
      expect(cutOff.coordinator.ready).toBe(true);
      await d.coordinator.tick();
      expect(d.coordinator.keyring.sealingKeyId).toBe('k2');
      await cutOff.coordinator.tick();
      expect(cutOff.coordinator.ready).toBe(false);
      expect(lines.join('')).toContain('secrets keyring: the active key is not configured here (not ready)');
      await cutOff.coordinator.stop();
      await d.coordinator.stop();
      // No message of any of this named a key or a secret.
      const logs = lines.join('');
      for (const k of [K0, K1, K2]) expect(logs).not.toContain(k.toString('base64'));
      for (const h of held) expect(logs).not.toContain(h.secret);
      expect(logs).toContain('every stored secret is sealed under the active key');
    });

    it('a new database with SECRETS_KEYS alone seals under its newest key from the first secret, the host-sync hash key random and stored', async () => {
      const other = await makeHarness();
      const fresh = await other.open();
      try {
        const coordinator = new KeyringCoordinator({ db: fresh, keyring: new Keyring([{ id: 'k2', key: K2 }]), variable: 'SECRETS_KEYS', batch: 2, logger });
        const crypto = new TenantCrypto(coordinator.keyring, await coordinator.join());
        const store = new TenantStore(fresh, crypto, clock);
        const { tenant, hostSyncSecret } = await store.create();
        const [row] = await fresh.query<{ primary_secret: string }>('SELECT primary_secret FROM tenants');
        expect(row!.primary_secret).toMatch(/^v2\.k2\./);
        const [ring] = await fresh.query<{ active_key_id: string; host_sync_hash_key: string }>('SELECT active_key_id, host_sync_hash_key FROM secrets_keyring');
        expect(ring).toMatchObject({ active_key_id: 'k2', host_sync_hash_key: expect.stringMatching(/^v2\.k2\./) });
        expect(await new HostSyncCheck(store, crypto.hostSync).authenticate(tenant.tenantId, { clientId: tenant.hostSyncClientId, secret: hostSyncSecret })).toBe(true);
        expect(await coordinator.status()).toMatchObject({ state: 'done', secrets: { k2: 2 }, removable_key_ids: [] });
        await coordinator.stop();
      } finally {
        await fresh.close();
        await other.destroy();
      }
    });
  });
}
