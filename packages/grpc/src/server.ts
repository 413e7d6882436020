import * as grpc from '@grpc/grpc-js';
import { grpcStatusFor, safeEqualAny, type ErrorCode } from '@service-relay/core';

export const INTERNAL_TOKEN_METADATA = 'x-internal-token';

/** host:port for binding, with IPv6 literals bracketed. */
export function grpcAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export function bindServer(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
  });
}

/** Graceful stop with a deadline, after which in-flight calls are cut. */
export function stopServer(server: grpc.Server, graceMs = 3000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Metadata carrying the service-to-service credential. */
export function internalMetadata(token: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(INTERNAL_TOKEN_METADATA, token);
  return md;
}

/** Timing-safe check of the caller's INTERNAL_TOKEN (`accepted`: it and, during a rotation, INTERNAL_TOKEN_NEXT). */
export function hasInternalToken(metadata: grpc.Metadata, accepted: string | readonly string[]): boolean {
  const got = metadata.get(INTERNAL_TOKEN_METADATA)[0];
  return typeof got === 'string' && safeEqualAny(got, accepted);
}

export function grpcError(code: ErrorCode, details: string = code): grpc.ServiceError {
  const err = new Error(details) as grpc.ServiceError;
  err.code = grpcStatusFor(code);
  err.details = details;
  err.metadata = new grpc.Metadata();
  return err;
}
