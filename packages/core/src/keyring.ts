import { hkdfSync } from 'node:crypto';
import { SecretBox } from './secret-box';

/**
 * The id of the key `SECRETS_KEY` stands for. What it sealed carries no id
 * (`v1.` + payload, the format of a single SECRETS_KEY), so a service that
 * predates keyrings still reads it.
 */
export const LEGACY_KEY_ID = 'k0';

/** A key id: 1-32 letters, digits, `_` or `-` (it sits between dots in a sealed value). */
export const KEY_ID_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;

const LEGACY_PREFIX = 'v1.';
const ID_PREFIX = 'v2.';

export interface KeyringEntry {
  id: string;
  /** 32 bytes. */
  key: Buffer;
}

/** A sealed value names a key this keyring does not have (the message names the id, never a key). */
export class UnknownKeyError extends Error {
  constructor(readonly keyId: string) {
    super(`sealed under key ${keyId}, which is not configured`);
    this.name = 'UnknownKeyError';
  }
}

/** The prefix of every value `id` seals: `v1.` for the legacy key, `v2.<id>.` for any other. */
export function sealedPrefix(id: string): string {
  return id === LEGACY_KEY_ID ? LEGACY_PREFIX : `${ID_PREFIX}${id}.`;
}

/** The id of the key that sealed `sealed`, or undefined when it is no sealed value of a known format. */
export function sealedKeyId(sealed: string): string | undefined {
  if (sealed.startsWith(LEGACY_PREFIX)) return LEGACY_KEY_ID;
  if (!sealed.startsWith(ID_PREFIX)) return undefined;
  const dot = sealed.indexOf('.', ID_PREFIX.length);
  const id = dot < 0 ? '' : sealed.slice(ID_PREFIX.length, dot);
  return KEY_ID_PATTERN.test(id) ? id : undefined;
}

/**
 * AES-256-GCM sealing at rest under several keys (SECRETS_KEYS, docs/OPERATIONS.md
 * "Rotating SECRETS_KEY"): every key opens what it sealed, one key seals
 * (the newest unless told otherwise). A sealed value names the key that
 * sealed it: `v2.<id>.` + base64url(nonce ‖ ciphertext ‖ tag), or `v1.` + the
 * same for the legacy key k0.
 */
export class Keyring {
  /** Key ids, newest first. */
  readonly ids: readonly string[];
  private readonly boxes = new Map<string, SecretBox>();
  private readonly keys = new Map<string, Buffer>();
  private sealing: string;

  constructor(entries: readonly KeyringEntry[]) {
    if (entries.length === 0) throw new Error('a keyring needs at least one key');
    for (const { id, key } of entries) {
      if (!KEY_ID_PATTERN.test(id)) throw new Error(`invalid key id ${JSON.stringify(id)}`);
      if (this.boxes.has(id)) throw new Error(`key id ${id} given twice`);
      this.boxes.set(id, new SecretBox(key));
      this.keys.set(id, key);
    }
    this.ids = entries.map((e) => e.id);
    this.sealing = this.ids[0]!;
  }

  /** A keyring of one key, the legacy one (SECRETS_KEY alone). */
  static legacy(key: Buffer): Keyring {
    return new Keyring([{ id: LEGACY_KEY_ID, key }]);
  }

  /** The first (newest) key id. */
  get newest(): string {
    return this.ids[0]!;
  }

  /** The key id new values are sealed with. */
  get sealingKeyId(): string {
    return this.sealing;
  }

  /** Seal with `id` from now on (one of this keyring's). */
  sealWith(id: string): void {
    if (!this.boxes.has(id)) throw new UnknownKeyError(id);
    this.sealing = id;
  }

  has(id: string): boolean {
    return this.boxes.has(id);
  }

  /** The raw key of `id` (for derivations), undefined when not configured. */
  key(id: string): Buffer | undefined {
    return this.keys.get(id);
  }

  /** Seals under the sealing key, or under `id`. */
  seal(plaintext: string, aad: string, id: string = this.sealing): string {
    const box = this.boxes.get(id);
    if (!box) throw new UnknownKeyError(id);
    const v1 = box.seal(plaintext, aad);
    return id === LEGACY_KEY_ID ? v1 : `${sealedPrefix(id)}${v1.slice(LEGACY_PREFIX.length)}`;
  }

  /** Throws UnknownKeyError for a key this keyring lacks, and an error when the value is not ours, altered, or bound to other data. */
  open(sealed: string, aad: string): string {
    const id = sealedKeyId(sealed);
    if (id === undefined) throw new Error('unknown sealed secret format');
    const box = this.boxes.get(id);
    if (!box) throw new UnknownKeyError(id);
    return box.open(id === LEGACY_KEY_ID ? sealed : `${LEGACY_PREFIX}${sealed.slice(sealedPrefix(id).length)}`, aad);
  }

  /** A keyring with the same ids whose keys are derived from these (HKDF-SHA256, empty salt, `info`), sealing with the same id. */
  derive(info: string): Keyring {
    const derived = new Keyring(this.ids.map((id) => ({ id, key: Buffer.from(hkdfSync('sha256', this.keys.get(id)!, Buffer.alloc(0), info, 32)) })));
    derived.sealWith(this.sealing);
    return derived;
  }
}
