import { ManualTenantFeed } from '@service-relay/tenant-events';
import type { BatchMode } from '../ws/batch-frame';
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { createLogger } from '@service-relay/core';
import type { VerifiedIdentity, VerifierClient } from '@service-relay/verifier-client';
import type { WebSocket } from 'ws';
import type { MessageBus } from '../messaging/message-bus';
import { MemoryMessageBus } from '../messaging/memory-message-bus';
import { createRealtimeMetrics } from '../metrics';
import { ManualScheduler } from '../timers/scheduler';
import { TopicHub } from '../topics/topic-hub';
import { Connection } from '../ws/connection';
import type { ConnectionContext } from '../ws/connection-context';
import { ConnectionRegistry } from '../ws/connection-registry';

/** Enough of a ws socket for a Connection: the frames it is sent, parsed. */
export class FakeSocket extends EventEmitter {
  readonly sent: Array<Record<string, unknown>> = [];
  readonly CLOSED = 3;
  readyState = 1;
  bufferedAmount = 0;
  send(data: string | Buffer): void {
    this.sent.push(JSON.parse(data.toString()) as Record<string, unknown>);
  }
  close(): void {}
  terminate(): void {}
  ping(): void {}
}

export function testIdentity(): VerifiedIdentity {
  return { tenantId: randomUUID(), userId: randomUUID(), expiresAt: Math.floor(Date.now() / 1000) + 3600, keySlot: 'primary', keyVersion: 1 };
}

/** A Connection on a FakeSocket with an in-memory bus and a hand-moved clock; `context` replaces any part of its context. */
export function fakeConnection(opts: { identity?: VerifiedIdentity; batching?: boolean | BatchMode; context?: Partial<ConnectionContext> } = {}): { socket: FakeSocket; conn: Connection; ctx: ConnectionContext } {
  const metrics = createRealtimeMetrics();
  const bus: MessageBus = opts.context?.messages ?? new MemoryMessageBus({ maxMessages: 10, ttlS: 60 });
  const ctx: ConnectionContext = {
    hub: new TopicHub(bus),
    messages: bus,
    registry: new ConnectionRegistry({} as VerifierClient, metrics, new ManualTenantFeed()),
    scheduler: new ManualScheduler(Date.now()),
    metrics,
    logger: createLogger({ service: 'realtime-test', level: 'silent' }),
    maxSubscriptions: 10,
    maxBufferedBytes: 1 << 20,
    ...opts.context,
  };
  const socket = new FakeSocket();
  const conn = new Connection(socket as unknown as WebSocket, opts.identity ?? testIdentity(), 'token', ctx, undefined, batchMode(opts.batching));
  return { socket, conn, ctx };
}

function batchMode(b: boolean | BatchMode | undefined): BatchMode {
  return b === true ? 'frames' : b === false || b === undefined ? 'none' : b;
}
