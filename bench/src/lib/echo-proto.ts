import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import { PROTO_OPTIONS, PROTO_ROOT } from '@service-relay/grpc';

const BENCH_PROTO_ROOT = fileURLToPath(new URL('../../proto/', import.meta.url));

/** The bench's echo service, loaded like every other proto (at run time, beside proto/). */
export function echoService(): grpc.ServiceClientConstructor {
  const def = protoLoader.loadSync('bench/echo/v1/echo.proto', { ...PROTO_OPTIONS, includeDirs: [BENCH_PROTO_ROOT, PROTO_ROOT] });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { bench: { echo: { v1: { Echo: grpc.ServiceClientConstructor } } } };
  return pkg.bench.echo.v1.Echo;
}
