import * as grpc from '@grpc/grpc-js';
import { clientConstructor } from './protos';

/** A unary method of a proto-loader client, called with metadata and call options (a deadline). */
export type UnaryMethod<Req, Res> = (req: Req, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Res) => void) => void;

/**
 * A plaintext client of another service-relay service. grpc-js waits 1 s
 * before the first reconnect and backs off to 120 s; peers on one network
 * restart in well under that, so reconnects start at 100 ms and stay under
 * 2 s unless `options` say otherwise.
 */
export function internalClient<Methods>(protoPath: string, service: string, address: string, options: grpc.ChannelOptions = {}): grpc.Client & Methods {
  const Ctor = clientConstructor(protoPath, service);
  return new Ctor(address, grpc.credentials.createInsecure(), {
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 2_000,
    ...options,
  }) as grpc.Client & Methods;
}
