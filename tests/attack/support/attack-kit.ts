import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { expect } from 'vitest';
import type { Stack } from '../../support/stack';
import { fetchSecret, me, signWithJose, type CreatedTenant } from '../../support/host';
import { TestSocket } from '../../support/ws-client';

/** A tenant with its fetched signing secret and one valid user token. */
export interface Victim extends CreatedTenant {
  secret: string;
  userId: string;
  token: string;
}

/** Creates a tenant through the admin API and signs a token for a fresh user, as a host would. */
export async function createVictim(stack: Stack): Promise<Victim> {
  const res = await fetch(`${stack.registryUrl}/admin/tenants`, { method: 'POST', headers: { authorization: `Bearer ${stack.adminToken}` } });
  expect(res.status).toBe(201);
  const tenant = (await res.json()) as CreatedTenant;
  const fetched = await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret);
  expect(fetched.status).toBe(200);
  const secret = ((await fetched.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
  const userId = randomUUID();
  return { ...tenant, secret, userId, token: await signWithJose(secret, tenant.tenant_id, userId, 900) };
}

/**
 * After an attack: every process still runs and answers /healthz, and a valid
 * user is still served over REST (gateway) and WebSocket (both realtimes).
 */
export async function expectStillServing(stack: Stack, user: Victim): Promise<void> {
  for (const [name, p] of Object.entries(stack.processes)) expect(p.running, `${name} exited:\n${p.logs.slice(-2000)}`).toBe(true);
  for (const [name, url] of Object.entries(stack.health)) {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    expect(res.status, `${name} /healthz`).toBe(200);
  }
  const res = await me(stack.gatewayUrl, user.token);
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ tenant_id: user.tenant_id, user_id: user.userId });
  for (const url of stack.realtimeWs) {
    const s = await TestSocket.open(url, user.token);
    s.close();
    await s.closed();
  }
}

/** No secret, credential or token reached any process's output. */
export function expectNoSecretsInLogs(stack: Stack, extra: string[]): void {
  const logs = stack.allLogs();
  expect(logs.length).toBeGreaterThan(0);
  for (const secret of [stack.adminToken, stack.internalToken, stack.secretsKey, ...extra]) {
    if (secret) expect(logs.includes(secret), `a secret of ${secret.length} characters is in the logs`).toBe(false);
  }
  expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./);
}

export const portOf = (url: string): number => Number(new URL(url.replace(/^ws/, 'http')).port);

export interface RawAnswer {
  /** Everything the server wrote before it closed (or before the deadline). */
  text: string;
  /** The status code of every complete response in `text`, in order. */
  statuses: number[];
  /** True when the server closed the connection. */
  closed: boolean;
}

/** Splits a raw HTTP/1.1 byte stream into complete responses (Content-Length or chunked) and returns their status codes. */
export function statusesOf(text: string): number[] {
  const statuses: number[] = [];
  let rest = text;
  for (;;) {
    const m = /^HTTP\/1\.1 (\d{3})[^\r\n]*\r\n/.exec(rest);
    const end = rest.indexOf('\r\n\r\n');
    if (!m || end < 0) return statuses;
    const head = rest.slice(0, end);
    let next: number;
    if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      const last = rest.indexOf('\r\n0\r\n\r\n', end);
      if (last < 0) return statuses;
      next = last + 7;
    } else {
      next = end + 4 + Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (rest.length < next) return statuses;
    }
    statuses.push(Number(m[1]));
    rest = rest.slice(next);
  }
}

/**
 * Writes `bytes` on a fresh connection and collects what comes back until
 * the server closes, `responses` complete responses arrived (when given), or
 * `timeoutMs` passed. (No half-close: Node's HTTP server aborts requests
 * still in flight when the client's side ends.)
 */
export function rawExchange(port: number, bytes: string | Buffer, opts: { responses?: number; timeoutMs?: number } = {}): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ text, statuses: statusesOf(text), closed });
    };
    const timer = setTimeout(() => finish(false), opts.timeoutMs ?? 5000);
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      if (opts.responses !== undefined && statusesOf(Buffer.concat(chunks).toString('latin1')).length >= opts.responses) finish(false);
    });
    socket.on('close', () => finish(true));
    socket.on('error', () => {});
    socket.write(bytes);
  });
}

/** A connection that has not written a byte yet. */
export function openSilent(port: number): Promise<{ socket: Socket; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const opened = Date.now();
    const closed = new Promise<number>((r) => socket.on('close', () => r(Date.now() - opened)));
    socket.on('error', () => {});
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

/** Resolves with `p`'s value, or `undefined` after `ms`. */
export function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]).finally(() => clearTimeout(timer));
}
