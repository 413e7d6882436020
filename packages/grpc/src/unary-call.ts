import type * as grpc from '@grpc/grpc-js';
import { RelayError } from '@service-relay/core';
import type { UnaryMethod } from './client';

export interface UnaryCallOptions {
  /** No answer within this many milliseconds: the call fails with DEADLINE_EXCEEDED. */
  deadlineMs: number;
  /** What is asked, for the error message ("registry feed"). */
  what: string;
}

/**
 * One unary call to another service with its metadata and a deadline. A
 * failed call (or one without an answer) rejects with `unavailable`, its
 * grpc.ServiceError as the cause; the caller decides on the answer's meaning.
 */
export function callUnary<Req, Res>(method: UnaryMethod<Req, Res>, req: Req, metadata: grpc.Metadata, opts: UnaryCallOptions): Promise<Res> {
  return new Promise((resolve, reject) => {
    method(req, metadata, { deadline: Date.now() + opts.deadlineMs }, (err, res) => {
      if (err || !res) return reject(new RelayError('unavailable', `${opts.what}: ${err?.details ?? 'no answer'}`, { cause: err ?? undefined }));
      resolve(res);
    });
  });
}

/** The gRPC status code of a callUnary failure; undefined when it was not a gRPC failure. */
export function grpcStatusOf(err: unknown): grpc.status | undefined {
  const cause = err instanceof RelayError ? err.cause : err;
  const code = (cause as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'number' ? code : undefined;
}
