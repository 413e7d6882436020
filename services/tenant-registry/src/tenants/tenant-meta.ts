/**
 * A tenant's display name and labels (#30), and the rules for them. Labels
 * follow Kubernetes' label syntax, so that operators who know one know the
 * other: a key of 1–63 lowercase letters, digits, `.`, `_`, `-` (starting
 * and ending with a letter or digit), a value of 0–63 letters, digits, `.`,
 * `_`, `-` (starting and ending with a letter or digit when not empty).
 */

/** What a create or an update sets; in an update a label set to null is removed and `name: null` clears the name. */
export interface TenantMetaInput {
  name?: string | null;
  labels?: Readonly<Record<string, string | null>>;
}

export type TenantLabels = Readonly<Record<string, string>>;

export const MAX_NAME_LENGTH = 200;
export const MAX_LABELS = 64;
const LABEL_KEY = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$/;
// Control characters (Unicode category Cc: C0, DEL, C1) and the line and paragraph separators.
const CONTROL = /[\p{Cc}\u2028\u2029]/u;

/** Why `v` is not a tenant name (undefined when it is one). */
function nameProblem(v: unknown): string | undefined {
  if (typeof v !== 'string') return 'name must be a string or null';
  if (v.length === 0 || v.length > MAX_NAME_LENGTH) return `name must be 1 to ${MAX_NAME_LENGTH} characters`;
  if (v.trim() !== v) return 'name must not start or end with white space';
  if (CONTROL.test(v)) return 'name must not contain control characters';
  return undefined;
}

export function labelKeyProblem(key: string): string | undefined {
  return LABEL_KEY.test(key) ? undefined : `label key ${JSON.stringify(key.slice(0, 80))} must be 1 to 63 lowercase letters, digits, ".", "_" or "-", starting and ending with a letter or digit`;
}

export function labelValueProblem(key: string, value: unknown): string | undefined {
  if (typeof value !== 'string') return `label ${JSON.stringify(key)} must be a string`;
  return LABEL_VALUE.test(value) ? undefined : `label ${JSON.stringify(key)} must be 0 to 63 letters, digits, ".", "_" or "-", starting and ending with a letter or digit`;
}

/**
 * Reads a create (`update: false`) or update body: a JSON object with
 * `name` and/or `labels` and nothing else. Returns the problem as a
 * sentence when it is not one (the answer's `problem`).
 */
export function parseTenantMeta(body: unknown, update: boolean): TenantMetaInput | string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'the body must be a JSON object';
  const unknown = Object.keys(body).filter((k) => k !== 'name' && k !== 'labels');
  if (unknown.length > 0) return `unknown field ${JSON.stringify(unknown[0]!.slice(0, 80))}: a tenant has "name" and "labels"`;
  const { name, labels } = body as { name?: unknown; labels?: unknown };
  if (update && name === undefined && labels === undefined) return 'nothing to change: give "name", "labels" or both';
  const out: { name?: string | null; labels?: Record<string, string | null> } = {};
  if (name !== undefined) {
    if (name !== null) {
      const problem = nameProblem(name);
      if (problem) return problem;
    }
    out.name = name as string | null;
  }
  if (labels !== undefined) {
    if (typeof labels !== 'object' || labels === null || Array.isArray(labels)) return 'labels must be a JSON object of strings';
    const entries = Object.entries(labels);
    if (entries.length > MAX_LABELS) return `at most ${MAX_LABELS} labels`;
    const parsed: Record<string, string | null> = {};
    for (const [key, value] of entries) {
      const problem = labelKeyProblem(key) ?? (value === null && update ? undefined : labelValueProblem(key, value));
      if (problem) return problem;
      parsed[key] = value as string | null;
    }
    out.labels = parsed;
  }
  return out;
}

/** The labels after an update: set the given, remove those set to null; undefined when more than MAX_LABELS would remain. */
export function mergeLabels(current: TenantLabels, change: Readonly<Record<string, string | null>>): TenantLabels | undefined {
  const next: Record<string, string> = { ...current };
  for (const [k, v] of Object.entries(change)) {
    if (v === null) delete next[k];
    else next[k] = v;
  }
  return Object.keys(next).length > MAX_LABELS ? undefined : sortedLabels(next);
}

/** Labels in key order (stable views and audit records). */
export function sortedLabels(labels: Readonly<Record<string, string>>): TenantLabels {
  return Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** A list filter: `key=value` label selectors (all must match) and a case-insensitive name search. */
export interface TenantFilter {
  labels?: TenantLabels;
  search?: string;
  /** Only enabled or only disabled tenants (#31, the console's state filter). */
  disabled?: boolean;
}

export const MAX_SEARCH_LENGTH = 200;

/** `label` query values (`key=value`, repeatable) and `q` into a filter; the problem as a sentence otherwise. */
export function parseTenantFilter(label: unknown, q: unknown, state?: unknown): TenantFilter | string {
  const filter: { labels?: Record<string, string>; search?: string; disabled?: boolean } = {};
  if (state !== undefined) {
    if (state !== 'enabled' && state !== 'disabled') return 'state is enabled or disabled';
    filter.disabled = state === 'disabled';
  }
  const selectors = label === undefined ? [] : Array.isArray(label) ? label : [label];
  if (selectors.length > MAX_LABELS) return `at most ${MAX_LABELS} label selectors`;
  for (const s of selectors) {
    if (typeof s !== 'string') return 'label must be key=value';
    const eq = s.indexOf('=');
    if (eq < 0) return 'label must be key=value';
    const key = s.slice(0, eq);
    const value = s.slice(eq + 1);
    const problem = labelKeyProblem(key) ?? labelValueProblem(key, value);
    if (problem) return problem;
    if (filter.labels?.[key] !== undefined && filter.labels[key] !== value) return `label ${JSON.stringify(key)} given twice with different values`;
    filter.labels = { ...filter.labels, [key]: value };
  }
  if (q !== undefined) {
    if (typeof q !== 'string' || q.length === 0 || q.length > MAX_SEARCH_LENGTH || CONTROL.test(q)) return `q must be 1 to ${MAX_SEARCH_LENGTH} characters`;
    filter.search = q;
  }
  return filter;
}
