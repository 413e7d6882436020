import type { HttpAnswer } from './raw-http';

/** Error codes a fuzzed endpoint may answer, by status. */
export type AllowedErrors = Record<number, readonly string[] | undefined>;

/**
 * Why an answer breaks the contract, or undefined when it keeps it: a status
 * in `ok`, or an allowed error status whose body is `{"errors":[code]}` with
 * one of that status's codes (never a 500, never a bare body).
 */
export function contractViolation(answer: HttpAnswer, allowed: AllowedErrors, ok: readonly number[] = []): string | undefined {
  if (ok.includes(answer.status)) return undefined;
  const codes = allowed[answer.status];
  if (codes === undefined) return `status ${answer.status} is not allowed: ${answer.body}`;
  let errors: unknown;
  try {
    errors = (JSON.parse(answer.body) as { errors?: unknown }).errors;
  } catch {
    return `status ${answer.status} with a body that is not JSON: ${answer.body}`;
  }
  if (!Array.isArray(errors) || errors.length !== 1 || !codes.includes(errors[0] as string)) return `status ${answer.status} with body ${answer.body} (allowed: ${codes.join(', ')})`;
  return undefined;
}
