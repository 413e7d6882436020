import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Metadata } from '@grpc/grpc-js';
import { context, ProxyTracerProvider, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { ConfigError, type EnvReader } from './config';

/** A trace context (re-exported so services need no OpenTelemetry dependency of their own). */
export type { Context as TraceContext } from '@opentelemetry/api';

const SAMPLERS = ['parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio', 'always_on', 'always_off', 'traceidratio'] as const;
export type SamplerName = (typeof SAMPLERS)[number];

export interface TracingConfig {
  /** OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP base URL; `/v1/traces` is appended). Unset: tracing is off. */
  endpoint: string | undefined;
  /** OTEL_TRACES_SAMPLER, default parentbased_always_on. */
  sampler: SamplerName;
  /** OTEL_TRACES_SAMPLER_ARG: the ratio of the *traceidratio samplers (0..1, default 1). */
  ratio: number;
}

/** The standard OpenTelemetry variables, read by each service's config loader. */
export function readTracingConfig(r: EnvReader): TracingConfig {
  const endpoint = r.optionalUrl('OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']);
  const sampler = r.oneOf('OTEL_TRACES_SAMPLER', SAMPLERS, 'parentbased_always_on');
  const arg = r.optional('OTEL_TRACES_SAMPLER_ARG');
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `must be a number between 0 and 1, got ${JSON.stringify(arg)}`);
  return { endpoint, sampler, ratio };
}

export interface Tracing {
  /** False when no endpoint is set: nothing is recorded and callers skip their span work. */
  readonly enabled: boolean;
  /** This service's tracer (a no-op one when disabled). */
  readonly tracer: Tracer;
  /** Flushes what is buffered and stops exporting; call once, at stop(). */
  shutdown(): Promise<void>;
}

/** Tracing off: the no-op API, no exporter, no context manager. */
export const TRACING_OFF: Tracing = Object.freeze({
  enabled: false,
  // A private proxy provider without a delegate always hands out the no-op tracer.
  tracer: new ProxyTracerProvider().getTracer('service-relay'),
  shutdown: () => Promise.resolve(),
});

export interface StartTracingOptions {
  /** Tests: spans go here (synchronously), with or without an endpoint. */
  exporter?: SpanExporter;
}

let contextManagerInstalled = false;

/**
 * One tracer provider per service (the launcher runs four services in one
 * process, each with its own service.name), none of them global: spans are
 * started only by our own code through `tracing.tracer`. What is global is the
 * AsyncLocalStorage context manager, so the active span follows a request
 * across awaits (the verifier-client reads it); installed on first use.
 */
export function startTracing(serviceName: string, config: TracingConfig, opts: StartTracingOptions = {}): Tracing {
  if (config.endpoint === undefined && !opts.exporter) return TRACING_OFF;
  if (!contextManagerInstalled) {
    contextManagerInstalled = context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  }
  const processor = opts.exporter
    ? new SimpleSpanProcessor(opts.exporter)
    : new BatchSpanProcessor(new OTLPTraceExporter({ url: `${config.endpoint!.replace(/\/+$/, '')}/v1/traces` }));
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
    sampler: samplerFor(config),
    spanProcessors: [processor],
  });
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    tracer: provider.getTracer('service-relay'),
    shutdown: () => (stopped ??= provider.shutdown()),
  };
}

function samplerFor(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.ratio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

const propagator = new W3CTraceContextPropagator();
const getter = {
  get: (carrier: Record<string, unknown>, key: string) => carrier[key] as string | string[] | undefined,
  keys: (carrier: Record<string, unknown>) => Object.keys(carrier),
};

/** The trace context a W3C `traceparent` (and `tracestate`) names; the root context when absent or malformed. */
export function contextFromTraceparent(traceparent: string | undefined, tracestate?: string): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, { traceparent, tracestate }, getter);
}

/** The trace context of an incoming HTTP request's `traceparent`/`tracestate` headers. */
export function contextFromHeaders(headers: IncomingHttpHeaders): Context {
  if (headers.traceparent === undefined) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, headers, getter);
}

/** The trace context of a gRPC call's `traceparent` metadata. */
export function contextFromMetadata(md: Metadata): Context {
  const [traceparent] = md.get('traceparent');
  const [tracestate] = md.get('tracestate');
  return contextFromTraceparent(typeof traceparent === 'string' ? traceparent : undefined, typeof tracestate === 'string' ? tracestate : undefined);
}

/** The W3C headers carrying `ctx` (default: the active context) onward; empty when it holds no span. */
export function traceHeaders(ctx: Context = context.active()): { traceparent?: string; tracestate?: string } {
  const carrier: { traceparent?: string; tracestate?: string } = {};
  if (trace.getSpanContext(ctx) === undefined) return carrier;
  propagator.inject(ctx, carrier, { set: (c, k, v) => void ((c as Record<string, string>)[k] = v) });
  return carrier;
}

/** Runs `fn` with `ctx` active (so the verifier-client and nested spans see it). */
export function withContext<T>(ctx: Context, fn: () => T): T {
  return context.with(ctx, fn);
}

export interface ServerSpan {
  span: Span;
  /** `parent` with this span in it: what downstream calls carry. */
  ctx: Context;
}

/** A SERVER span continuing `parent` (the root context starts a new trace). */
export function startServerSpan(tracing: Tracing, name: string, parent: Context, attributes: Attributes = {}): ServerSpan {
  const span = tracing.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  return { span, ctx: trace.setSpan(parent, span) };
}

/** Ends a span; an HTTP status of 500 and above (or `error`) marks it failed. */
export function endSpan(span: Span, outcome: { status?: number; error?: string } = {}): void {
  if (outcome.status !== undefined) span.setAttribute('http.response.status_code', outcome.status);
  if (outcome.error !== undefined || (outcome.status ?? 0) >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error });
  span.end();
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Wraps an HTTP request listener in a SERVER span continuing the request's
 * `traceparent`; the span ends when the response closes. With `forward`, the
 * request's own `traceparent`/`tracestate` are replaced by this span's, so a
 * proxy that copies the request headers carries our span, not the client's.
 * Disabled tracing returns the listener itself: nothing on the request path.
 */
export function traceRequests(tracing: Tracing, handler: RequestListener, opts: { forward?: boolean } = {}): RequestListener {
  if (!tracing.enabled) return handler;
  return (req, res) => {
    const { span, ctx } = startServerSpan(tracing, req.method ?? 'GET', contextFromHeaders(req.headers), {
      'http.request.method': req.method ?? '',
      'url.path': (req.url ?? '/').split('?', 1)[0]!,
    });
    if (opts.forward) {
      delete req.headers.traceparent;
      delete req.headers.tracestate;
      Object.assign(req.headers, traceHeaders(ctx));
      // These are now ours, for the next hop: a client's `Connection:
      // traceparent` must not get them dropped as hop-by-hop by the proxy.
      const listed = req.headers.connection;
      if (listed !== undefined && /trace(parent|state)/i.test(listed)) {
        req.headers.connection = listed.split(',').filter((n) => !/^\s*trace(parent|state)\s*$/i.test(n)).join(',');
      }
    }
    res.once('close', () => endSpan(span, { status: res.headersSent ? res.statusCode : undefined, error: res.writableFinished ? undefined : 'closed before the answer was sent' }));
    withContext(ctx, () => handler(req, res));
  };
}

type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => Promise<unknown> | void;

/** Wraps an 'upgrade' listener in a SERVER span (`WS upgrade`) that ends when the listener's promise settles. */
export function traceUpgrades(tracing: Tracing, handler: UpgradeListener): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  if (!tracing.enabled) return handler;
  return (req, socket, head) => {
    const { span, ctx } = startServerSpan(tracing, 'WS upgrade', contextFromHeaders(req.headers), { 'url.path': (req.url ?? '/').split('?', 1)[0]! });
    const done = withContext(ctx, () => handler(req, socket, head));
    if (done) done.then(() => endSpan(span), (err: unknown) => endSpan(span, { error: (err as Error).message }));
    else endSpan(span);
  };
}
