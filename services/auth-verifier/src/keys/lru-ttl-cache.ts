interface Slot<V> {
  value: V;
  expiresAt: number;
}

/**
 * A bounded map whose entries expire. Map iteration order is insertion order,
 * so re-inserting on read keeps the least recently used entry first, and that
 * is the one evicted when the bound is reached. Time comes from the caller, so
 * tests move an injected clock instead of sleeping.
 */
export class LruTtlCache<K, V> {
  private readonly slots = new Map<K, Slot<V>>();

  constructor(private readonly maxEntries: number) {
    if (!(maxEntries >= 1)) throw new Error('LruTtlCache needs room for at least one entry');
  }

  get(key: K, now: number): V | undefined {
    const slot = this.slots.get(key);
    if (slot === undefined) return undefined;
    this.slots.delete(key);
    if (slot.expiresAt <= now) return undefined;
    this.slots.set(key, slot);
    return slot.value;
  }

  set(key: K, value: V, expiresAt: number): void {
    this.slots.delete(key);
    if (this.slots.size >= this.maxEntries) this.slots.delete(this.slots.keys().next().value as K);
    this.slots.set(key, { value, expiresAt });
  }

  delete(key: K): void {
    this.slots.delete(key);
  }

  clear(): void {
    this.slots.clear();
  }

  get size(): number {
    return this.slots.size;
  }
}
