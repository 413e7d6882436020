import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import { encodeVerifyBatchResponse } from './verify-batch-codec';

/** The one source of truth for protos, loaded at run time (no generated copies). */
export const PROTO_ROOT = fileURLToPath(new URL('../../../proto/', import.meta.url));

/** One option set for every proto we load. int64 arrive as JS numbers. */
export const PROTO_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

const cache = new Map<string, grpc.GrpcObject>();

/** Loads a proto by its path under proto/, e.g. `relay/auth/v1/verifier.proto`. */
export function loadProto(relPath: string): grpc.GrpcObject {
  let pkg = cache.get(relPath);
  if (!pkg) {
    pkg = grpc.loadPackageDefinition(protoLoader.loadSync(relPath, PROTO_OPTIONS));
    cache.set(relPath, pkg);
  }
  return pkg;
}

/**
 * Serializers written by hand in place of proto-loader's, where a
 * measurement showed the library's cost (each codec's file says which).
 * Servers use them; what goes over the wire is the same protobuf.
 */
const OWN_SERIALIZERS: Record<string, Record<string, { responseSerialize: (value: never) => Buffer }>> = {
  'relay.auth.v1.TokenVerifier': { VerifyBatchStream: { responseSerialize: encodeVerifyBatchResponse } },
};

/** The service definition at a dotted name, e.g. `relay.auth.v1.TokenVerifier`. */
export function serviceDefinition(relPath: string, dotted: string): grpc.ServiceDefinition {
  const def = lookup(loadProto(relPath), dotted).service;
  const own = OWN_SERIALIZERS[dotted];
  if (!own) return def;
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = { ...def };
  for (const [method, codec] of Object.entries(own)) out[method] = { ...def[method]!, ...codec } as grpc.MethodDefinition<unknown, unknown>;
  return out as grpc.ServiceDefinition;
}

/** A client constructor at a dotted name. */
export function clientConstructor(relPath: string, dotted: string): grpc.ServiceClientConstructor {
  return lookup(loadProto(relPath), dotted);
}

function lookup(root: grpc.GrpcObject, dotted: string): grpc.ServiceClientConstructor {
  let node: unknown = root;
  for (const part of dotted.split('.')) node = (node as Record<string, unknown>)[part];
  if (typeof node !== 'function') throw new Error(`no gRPC service ${dotted}`);
  return node as grpc.ServiceClientConstructor;
}

export const VERIFIER_PROTO = 'relay/auth/v1/verifier.proto';
export const VERIFIER_SERVICE = 'relay.auth.v1.TokenVerifier';
export const REGISTRY_KEYS_PROTO = 'relay/registry/v1/keys.proto';
export const REGISTRY_KEYS_SERVICE = 'relay.registry.v1.KeyService';
export const REGISTRY_FEED_PROTO = 'relay/registry/v1/feed.proto';
export const REGISTRY_FEED_SERVICE = 'relay.registry.v1.TenantFeed';
export const REGISTRY_USAGE_PROTO = 'relay/registry/v1/usage.proto';
export const REGISTRY_USAGE_SERVICE = 'relay.registry.v1.Usage';
