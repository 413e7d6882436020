import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from './protos';

type Status = 'SERVING' | 'NOT_SERVING';

/**
 * grpc.health.v1 on a server. "" is the whole server; other names are the
 * services it hosts. setStatus() flips them (NOT_SERVING while shutting down).
 */
export class HealthService {
  private readonly statuses = new Map<string, Status>();
  private readonly watchers = new Set<{ service: string; call: grpc.ServerWritableStream<{ service: string }, unknown> }>();

  constructor(services: string[]) {
    this.statuses.set('', 'SERVING');
    for (const s of services) this.statuses.set(s, 'SERVING');
  }

  addTo(server: grpc.Server): void {
    server.addService(serviceDefinition('grpc/health/v1/health.proto', 'grpc.health.v1.Health'), {
      Check: (call: grpc.ServerUnaryCall<{ service: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        const status = this.statuses.get(call.request.service);
        if (!status) return cb({ code: grpc.status.NOT_FOUND, details: 'unknown service' });
        cb(null, { status });
      },
      Watch: (call: grpc.ServerWritableStream<{ service: string }, unknown>) => {
        const entry = { service: call.request.service, call };
        this.watchers.add(entry);
        call.write({ status: this.statuses.get(entry.service) ?? 'SERVICE_UNKNOWN' });
        call.on('cancelled', () => this.watchers.delete(entry));
      },
    });
  }

  setAll(status: Status): void {
    for (const name of this.statuses.keys()) this.statuses.set(name, status);
    for (const w of this.watchers) w.call.write({ status: this.statuses.get(w.service) ?? 'SERVICE_UNKNOWN' });
  }

  endWatches(): void {
    for (const w of this.watchers) w.call.end();
    this.watchers.clear();
  }
}
