import { randomUUID } from 'node:crypto';

// Short and plain: it ends up in logs and in upstream headers.
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's X-Request-Id when it is short and plain, otherwise a random UUID. */
export function requestIdOf(given: string | string[] | undefined): string {
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
