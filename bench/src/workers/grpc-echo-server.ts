import * as grpc from '@grpc/grpc-js';
import { bindServer, serviceDefinition, stopServer, VERIFIER_PROTO, VERIFIER_SERVICE, type VerifyBatchRequest } from '@service-relay/grpc';
import { echoService } from '../lib/echo-proto';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The transport baseline: answers every request with a fixed verdict shaped
 * like the verifier's (same fields, same sizes), doing no check at all. It
 * serves bench.echo.v1.Echo (the row's baseline) and, for the informational
 * batched figure, relay.auth.v1.TokenVerifier itself, so the real
 * verifier-client can be pointed at it: the same batched messages, no check.
 */
const now = Math.floor(Date.now() / 1000);
const VERDICT = {
  valid: true,
  tenant_id: '00000000-0000-4000-8000-000000000000',
  user_id: '00000000-0000-4000-8000-000000000001',
  expires_at: now + 3600,
  key_slot: 'KEY_SLOT_PRIMARY',
  key_version: 1,
  reason: '',
  cap_json: '',
  // The bench's tokens carry an integer iat, which the verifier reports.
  issued_at: now,
};

const server = new grpc.Server();
server.addService(echoService().service, {
  Echo: (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => cb(null, VERDICT),
  EchoStream: (call: grpc.ServerDuplexStream<{ id: number }, unknown>) => {
    call.on('data', (req: { id: number }) => call.write({ id: req.id, result: VERDICT, unavailable: false }));
    call.on('end', () => call.end());
    call.on('error', () => {});
  },
});
server.addService(serviceDefinition(VERIFIER_PROTO, VERIFIER_SERVICE), {
  Verify: (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => cb(null, VERDICT),
  VerifyStream: (call: grpc.ServerDuplexStream<{ id: number }, unknown>) => {
    call.on('data', (req: { id: number }) => call.write({ id: req.id, result: VERDICT, unavailable: false }));
    call.on('end', () => call.end());
    call.on('error', () => {});
  },
  VerifyBatchStream: (call: grpc.ServerDuplexStream<VerifyBatchRequest, unknown>) => {
    call.on('data', (req: VerifyBatchRequest) => call.write({ results: req.checks.map((c) => ({ id: c.id, result: VERDICT, unavailable: false })) }));
    call.on('end', () => call.end());
    call.on('error', () => {});
  },
});

serveWorker(
  {
    start: async () => ({ port: await bindServer(server, '127.0.0.1:0') }),
  },
  () => stopServer(server, 1000),
);
