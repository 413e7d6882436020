const ID_SHAPE = /^(\d{1,15})-(\d{1,15})$/;

/**
 * Negative, zero or positive as a is before, the same as or after b; undefined
 * when either is not a `<ms>-<seq>` id (ids are opaque to clients, so an id of
 * another shape is only ever compared for equality).
 */
export function compareIds(a: string, b: string): number | undefined {
  const ma = ID_SHAPE.exec(a);
  const mb = ID_SHAPE.exec(b);
  if (!ma || !mb) return undefined;
  const d = Number(ma[1]) - Number(mb[1]);
  return d !== 0 ? d : Number(ma[2]) - Number(mb[2]);
}

const RECENT = 256;

/**
 * Per topic: the last id delivered to the app (the `after` of the next
 * subscribe) and the most recent ids, so a message seen before a reconnect
 * is never delivered twice.
 */
export class SeenIds {
  last: string | undefined;
  private readonly recent = new Set<string>();

  constructor(last?: string) {
    this.last = last;
  }

  /** True the first time an id is offered and it is after `last`; records it. */
  admit(id: string): boolean {
    if (this.recent.has(id)) return false;
    if (this.last !== undefined) {
      const order = compareIds(id, this.last);
      if (order !== undefined && order <= 0) return false;
    }
    this.recent.add(id);
    if (this.recent.size > RECENT) this.recent.delete(this.recent.values().next().value as string);
    this.last = id;
    return true;
  }
}
