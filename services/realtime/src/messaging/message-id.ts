/**
 * Message ids are `<ms>-<seq>`. They are compared numerically: as strings,
 * "9-0" would sort after "10-0". Both parts are kept within safe integers.
 */
const ID_SHAPE = /^(\d{1,15})-(\d{1,15})$/;

export interface ParsedId {
  ms: number;
  seq: number;
}

export function parseMessageId(id: string): ParsedId | undefined {
  const m = ID_SHAPE.exec(id);
  if (!m) return undefined;
  return { ms: Number(m[1]), seq: Number(m[2]) };
}

export function isMessageId(value: unknown): value is string {
  return typeof value === 'string' && ID_SHAPE.test(value);
}

/** Negative when a < b, 0 when equal, positive when a > b. Both must be valid ids. */
export function compareMessageIds(a: string, b: string): number {
  const pa = parseMessageId(a)!;
  const pb = parseMessageId(b)!;
  return pa.ms !== pb.ms ? pa.ms - pb.ms : pa.seq - pb.seq;
}

export function idMillis(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}
