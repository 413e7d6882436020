import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, startTracing, type Tracing } from '@service-relay/core';
import * as verifierService from '@service-relay/auth-verifier';
import * as gatewayService from '@service-relay/edge-gateway';
import * as realtimeService from '@service-relay/realtime';
import { ManualTenantFeed, MemoryTenantEventBus } from '@service-relay/tenant-events';
import { signToken } from '@service-relay/testkit';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { FakeKeyService } from '../services/auth-verifier/src/test-support/fake-key-service';

const INTERNAL_TOKEN = 'internal-token-for-tracing-tests-0123456789';
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_PARENT = '00f067aa0ba902b7';

/**
 * The gateway, the real verifier and realtime in one process, each with its
 * own tracer provider (as under the launcher) writing to one in-memory
 * exporter: one request yields spans in all three that share a trace id.
 */
describe('trace context from the gateway through the verifier to realtime', () => {
  const exporter = new InMemorySpanExporter();
  const quiet = createLogger({ service: 'test', level: 'silent' });
  const bus = new MemoryTenantEventBus();
  const keys = new FakeKeyService(INTERNAL_TOKEN, bus);
  const tenant = keys.create();
  const historyDir = mkdtempSync(join(tmpdir(), 'relay-tracing-'));
  const tracings: Tracing[] = [];
  const tracing = (name: string) => {
    const t = startTracing(name, { endpoint: undefined, sampler: 'parentbased_always_on', ratio: 1 }, { exporter });
    tracings.push(t);
    return t;
  };
  let verifier: verifierService.VerifierServer;
  let realtime: realtimeService.RealtimeServer;
  let gateway: gatewayService.GatewayServer;
  let gatewayUrl = '';

  beforeAll(async () => {
    const registryAddr = await keys.start();
    const base = { INTERNAL_TOKEN, REGISTRY_GRPC_ADDR: registryAddr, LOG_LEVEL: 'silent' };
    verifier = verifierService.createServer(verifierService.loadConfig({ ...base, VERIFIER_GRPC_PORT: '0', VERIFIER_HTTP_PORT: '0' }, { standalone: false }), {
      bus,
      logger: quiet,
      tracing: tracing('auth-verifier'),
    });
    await verifier.start();
    const verifierAddr = `127.0.0.1:${verifier.grpcPort}`;
    realtime = realtimeService.createServer(realtimeService.loadConfig({ ...base, REALTIME_PORT: '0', REALTIME_OPS_PORT: '0', VERIFIER_ADDR: verifierAddr, HISTORY_DIR: historyDir }, { standalone: false }), {
      bus,
      feed: new ManualTenantFeed(),
      logger: quiet,
      tracing: tracing('realtime'),
    });
    await realtime.start();
    gateway = gatewayService.createServer(
      gatewayService.loadConfig({ ...base, GATEWAY_PORT: '0', GATEWAY_OPS_PORT: '0', VERIFIER_ADDR: verifierAddr, REALTIME_URL: `http://127.0.0.1:${realtime.port}`, AUTH_CACHE_TTL_S: '0' }),
      { bus, feed: new ManualTenantFeed(), logger: quiet, tracing: tracing('edge-gateway') },
    );
    await gateway.start();
    gatewayUrl = `http://127.0.0.1:${gateway.port}`;
  });

  afterAll(async () => {
    await gateway?.stop();
    await realtime?.stop();
    await verifier?.stop();
    await keys.stop();
    await Promise.all(tracings.map((t) => t.shutdown()));
    rmSync(historyDir, { recursive: true, force: true });
  });

  beforeEach(() => exporter.reset());

  const token = () => signToken({ secret: tenant.primary.secret, tenantId: tenant.tenantId, userId: randomUUID() });
  const serviceOf = (s: ReadableSpan) => s.resource.attributes['service.name'];
  /** Spans end when the response closes, a moment after the client has it. */
  const spansOf = async (n: number) => {
    await expect.poll(() => exporter.getFinishedSpans().length).toBeGreaterThanOrEqual(n);
    return exporter.getFinishedSpans();
  };

  it('continues a client traceparent: gateway, verifier and realtime spans share its trace id, each the child of the gateway span', async () => {
    const res = await fetch(`${gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token()}`, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT}-01` } });
    expect(res.status).toBe(200);
    const spans = await spansOf(3);
    const byService = new Map(spans.map((s) => [serviceOf(s), s]));
    expect([...byService.keys()].sort()).toEqual(['auth-verifier', 'edge-gateway', 'realtime']);
    for (const s of spans) expect(s.spanContext().traceId).toBe(CLIENT_TRACE_ID);
    const gw = byService.get('edge-gateway')!;
    expect(gw.parentSpanContext?.spanId).toBe(CLIENT_PARENT);
    expect(byService.get('auth-verifier')!.parentSpanContext?.spanId).toBe(gw.spanContext().spanId);
    expect(byService.get('realtime')!.parentSpanContext?.spanId).toBe(gw.spanContext().spanId);
    expect(gw.attributes['http.response.status_code']).toBe(200);
  });

  it('starts a trace at the gateway when the client sends none, and realtime and the verifier join it', async () => {
    const res = await fetch(`${gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token()}` } });
    expect(res.status).toBe(200);
    const spans = await spansOf(3);
    const gw = spans.find((s) => serviceOf(s) === 'edge-gateway')!;
    expect(gw.parentSpanContext).toBeUndefined();
    expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([gw.spanContext().traceId]));
  });

  it('keeps its traceparent for realtime even when a client lists it in Connection (hop-by-hop)', async () => {
    // fetch refuses to send a Connection header; node:http does not.
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const headers = { authorization: `Bearer ${token()}`, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT}-01`, connection: 'keep-alive, traceparent' };
      get(`${gatewayUrl}/api/v1/me`, { headers, agent: false }, (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode));
      }).once('error', reject);
    });
    expect(status).toBe(200);
    const spans = await spansOf(3);
    const gw = spans.find((s) => serviceOf(s) === 'edge-gateway')!;
    expect(spans.find((s) => serviceOf(s) === 'realtime')?.parentSpanContext?.spanId).toBe(gw.spanContext().spanId);
  });

  it('continues a traceparent on the WebSocket upgrade check: realtime and the verifier span share it', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${realtime.port}/ws`, { headers: { authorization: `Bearer ${token()}`, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT}-01` } });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.close();
    const spans = await spansOf(2);
    const upgrade = spans.find((s) => s.name === 'WS upgrade')!;
    const check = spans.find((s) => serviceOf(s) === 'auth-verifier')!;
    expect(upgrade.spanContext().traceId).toBe(CLIENT_TRACE_ID);
    expect(upgrade.parentSpanContext?.spanId).toBe(CLIENT_PARENT);
    expect(check.parentSpanContext?.spanId).toBe(upgrade.spanContext().spanId);
  });
});
