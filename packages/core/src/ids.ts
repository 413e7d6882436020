/** Canonical lowercase UUID, as the registry issues tenant ids. */
export const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** UUID in 8-4-4-4-12 form, either case (user ids come from the host). */
export const ANY_CASE_UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export function isCanonicalUuid(value: unknown): value is string {
  return typeof value === 'string' && CANONICAL_UUID.test(value);
}

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && ANY_CASE_UUID.test(value);
}
