import * as grpc from '@grpc/grpc-js';
import { RelayError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import type { UnaryMethod } from './client';
import { callUnary, grpcStatusOf } from './unary-call';

function answering(err: grpc.ServiceError | null, res?: { ok: boolean }): { method: UnaryMethod<{ q: number }, { ok: boolean }>; deadlines: number[] } {
  const deadlines: number[] = [];
  const method: UnaryMethod<{ q: number }, { ok: boolean }> = (_req, _md, opts, cb) => {
    deadlines.push(Number(opts.deadline));
    cb(err, res);
  };
  return { method, deadlines };
}

function serviceError(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
}

describe('callUnary', () => {
  it('resolves with the answer and passes a deadline deadlineMs from now', async () => {
    const { method, deadlines } = answering(null, { ok: true });
    const before = Date.now();
    await expect(callUnary(method, { q: 1 }, new grpc.Metadata(), { deadlineMs: 500, what: 'thing' })).resolves.toEqual({ ok: true });
    expect(deadlines[0]).toBeGreaterThanOrEqual(before + 500);
    expect(deadlines[0]).toBeLessThanOrEqual(Date.now() + 500);
  });

  it('a failed call rejects with a coded unavailable error carrying the gRPC status', async () => {
    const { method } = answering(serviceError(grpc.status.UNAUTHENTICATED, 'bad token'));
    const err = await callUnary(method, { q: 1 }, new grpc.Metadata(), { deadlineMs: 500, what: 'registry keys' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RelayError);
    expect((err as RelayError).code).toBe('unavailable');
    expect((err as RelayError).message).toBe('registry keys: bad token');
    expect(grpcStatusOf(err)).toBe(grpc.status.UNAUTHENTICATED);
  });

  it('a call without an answer rejects as unavailable, without a gRPC status', async () => {
    const { method } = answering(null, undefined);
    const err = await callUnary(method, { q: 1 }, new grpc.Metadata(), { deadlineMs: 500, what: 'registry feed' }).catch((e: unknown) => e);
    expect((err as RelayError).code).toBe('unavailable');
    expect((err as RelayError).message).toBe('registry feed: no answer');
    expect(grpcStatusOf(err)).toBeUndefined();
  });
});
