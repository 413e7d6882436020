import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from './openapi.generated';

/** The admin API's types, generated from docs/openapi.yaml (npm run types -w @service-relay/console). */
export type Schemas = components['schemas'];
export type Tenant = Schemas['Tenant'];
export type TenantWithSecret = Schemas['TenantWithHostSyncSecret'];
export type AuditEntry = Schemas['AuditEntry'];
export type LiveView = Schemas['LiveView'];
export type LimitsDocument = Schemas['LimitsDocument'];
export type TenantLimitsView = Schemas['TenantLimitsView'];

const KEY = 'relay-admin-token';

/**
 * The admin token, for this browser tab's session only (sessionStorage: gone
 * when the tab closes, never sent by the browser on its own as a cookie is).
 */
export const adminToken = {
  get: (): string | null => sessionStorage.getItem(KEY),
  set: (token: string): void => sessionStorage.setItem(KEY, token),
  clear: (): void => sessionStorage.removeItem(KEY),
};

/** Called when the API refuses the token (401): the console goes back to sign-in. */
let onRefused: () => void = () => {};
export function whenTokenRefused(handler: () => void): void {
  onRefused = handler;
}

const bearer: Middleware = {
  onRequest({ request }) {
    const token = adminToken.get();
    if (token) request.headers.set('authorization', `Bearer ${token}`);
    return request;
  },
  onResponse({ response }) {
    if (response.status === 401) onRefused();
    return response;
  },
};

/** Typed by docs/openapi.yaml: a path, parameter or field the API no longer has fails the console's type-check. */
export const api = createClient<paths>({ baseUrl: location.origin, credentials: 'omit', cache: 'no-store' });
api.use(bearer);

/** An admin answer as it came: its status and its JSON body, success or error. */
export interface Answer<T = unknown> {
  status: number;
  body: T | Record<string, unknown> | undefined;
  ok: boolean;
  data: T | undefined;
}

/** What an openapi-fetch call gives, made one shape for the screens. */
export async function answerOf<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<Answer<T>> {
  try {
    const { data, error, response } = await call;
    return { status: response.status, ok: response.ok, data, body: (data ?? error) as Answer<T>['body'] };
  } catch (err) {
    return { status: 0, ok: false, data: undefined, body: { errors: ['network'], problem: (err as Error).message } };
  }
}

/** The error code of an answer (`errors[0]`), if any. */
export function errorCode(a: Answer): string | undefined {
  const errors = (a.body as { errors?: unknown } | undefined)?.errors;
  return Array.isArray(errors) && typeof errors[0] === 'string' ? errors[0] : undefined;
}

export function problemOf(a: Answer): string | undefined {
  const p = (a.body as { problem?: unknown } | undefined)?.problem;
  return typeof p === 'string' ? p : undefined;
}
