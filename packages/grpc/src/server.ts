import * as grpc from '@grpc/grpc-js';
import { grpcStatusFor, safeEqual, type ErrorCode } from '@service-relay/core';

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

/** Timing-safe check of the caller's INTERNAL_TOKEN. */
export function hasInternalToken(metadata: grpc.Metadata, expected: string): boolean {
  const got = metadata.get(INTERNAL_TOKEN_METADATA)[0];
  return typeof got === 'string' && safeEqual(got, expected);
}

export function grpcError(code: ErrorCode, details: string = code): grpc.ServiceError {
  const err = new Error(details) as grpc.ServiceError;
  err.code = grpcStatusFor(code);
  err.details = details;
  err.metadata = new grpc.Metadata();
  return err;
}
