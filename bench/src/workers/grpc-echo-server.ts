import * as grpc from '@grpc/grpc-js';
import { bindServer, stopServer } from '@service-relay/grpc';
import { echoService } from '../lib/echo-proto';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The transport baseline: answers every request with a fixed verdict shaped
 * like the verifier's (same fields, same sizes), doing no check at all.
 */
const VERDICT = {
  valid: true,
  tenant_id: '00000000-0000-4000-8000-000000000000',
  user_id: '00000000-0000-4000-8000-000000000001',
  expires_at: Math.floor(Date.now() / 1000) + 3600,
  key_slot: 'KEY_SLOT_PRIMARY',
  key_version: 1,
  reason: '',
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

serveWorker(
  {
    start: async () => ({ port: await bindServer(server, '127.0.0.1:0') }),
  },
  () => stopServer(server, 1000),
);
