import { crc32 } from 'node:zlib';
import { isMessageId } from './message-id';

/**
 * The embedded store's journal lines: `<crc32 hex> <json>\n`. The checksum
 * tells a torn or damaged line from a good one, so a journal that lost part
 * of a write is known to be incomplete instead of silently short.
 */
export type JournalRecord =
  /** A channel's epoch begins (also the head of each channel in a compacted journal). */
  | { r: 'e'; t: string; c: string; e: string; s: string; x: string }
  /** A message; `k` is its idempotency key, if any. */
  | { r: 'm'; t: string; c: string; i: string; u: string; dataJson: string; k?: string }
  /** Written last by a clean shutdown. */
  | { r: 'end' };

export function epochLine(t: string, c: string, epoch: string, since: string, maxDeleted: string): string {
  return frame(`{"r":"e","t":${JSON.stringify(t)},"c":${JSON.stringify(c)},"e":${JSON.stringify(epoch)},"s":"${since}","x":"${maxDeleted}"}`);
}

export function messageLine(t: string, c: string, id: string, userId: string, dataJson: string, key: string | undefined): string {
  const k = key === undefined ? '' : `,"k":${JSON.stringify(key)}`;
  return frame(`{"r":"m","t":${JSON.stringify(t)},"c":${JSON.stringify(c)},"i":"${id}","u":${JSON.stringify(userId)},"d":${dataJson}${k}}`);
}

export const END_LINE = frame('{"r":"end"}');

function frame(json: string): string {
  return `${crc32(json).toString(16).padStart(8, '0')} ${json}\n`;
}

/** One line without its newline; undefined when it is damaged or unknown. */
export function parseLine(line: string): JournalRecord | undefined {
  const json = line.slice(9);
  if (line[8] !== ' ' || crc32(json).toString(16).padStart(8, '0') !== line.slice(0, 8)) return undefined;
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const str = (k: string) => typeof v[k] === 'string';
  if (v.r === 'end') return { r: 'end' };
  if (!str('t') || !str('c')) return undefined;
  const t = v.t as string;
  const c = v.c as string;
  if (v.r === 'e' && str('e') && isMessageId(v.s) && isMessageId(v.x)) return { r: 'e', t, c, e: v.e as string, s: v.s, x: v.x };
  if (v.r === 'm' && isMessageId(v.i) && str('u') && 'd' in v && (v.k === undefined || str('k'))) {
    let dataJson: string;
    try {
      dataJson = JSON.stringify(v.d);
    } catch {
      return undefined;
    }
    const rec: JournalRecord = { r: 'm', t, c, i: v.i, u: v.u as string, dataJson };
    if (v.k !== undefined) rec.k = v.k as string;
    return rec;
  }
  return undefined;
}
