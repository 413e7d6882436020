import { describe, expect, it } from 'vitest';
import { ConfigError, EnvReader } from './config';
import { contextFromTraceparent, readTracingConfig, startServerSpan, startTracing, traceHeaders, traceRequests, TRACING_OFF, withContext } from './tracing';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('tracing', () => {
  it('is off without OTEL_EXPORTER_OTLP_ENDPOINT: the no-op tracer, and request listeners are left as they are', async () => {
    const config = readTracingConfig(new EnvReader({}));
    expect(config).toEqual({ endpoint: undefined, sampler: 'parentbased_always_on', ratio: 1 });
    const tracing = startTracing('edge-gateway', config);
    expect(tracing).toBe(TRACING_OFF);
    expect(tracing.enabled).toBe(false);
    const span = tracing.tracer.startSpan('x');
    expect(span.isRecording()).toBe(false);
    span.end();
    const listener = () => {};
    expect(traceRequests(tracing, listener, { forward: true })).toBe(listener);
    // Nothing active, nothing injected: the verifier-client adds no field.
    expect(traceHeaders()).toEqual({});
    await tracing.shutdown();
  });

  it('is on with an endpoint (an OTLP/HTTP exporter, not contacted until spans are flushed)', async () => {
    const tracing = startTracing('realtime', readTracingConfig(new EnvReader({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/' })));
    expect(tracing.enabled).toBe(true);
    await tracing.shutdown();
  });

  it('reads the sampler variables and refuses bad values at start', () => {
    const r = (env: Record<string, string>) => readTracingConfig(new EnvReader(env));
    expect(r({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })).toMatchObject({ sampler: 'parentbased_traceidratio', ratio: 0.25 });
    expect(() => r({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(ConfigError);
    expect(() => r({ OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(ConfigError);
    expect(() => r({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(ConfigError);
  });

  it('continues a traceparent and hands the child span on through the active context', () => {
    const tracing = startTracing('t', { endpoint: undefined, sampler: 'parentbased_always_on', ratio: 1 }, { exporter: { export: (_s, cb) => cb({ code: 0 }), shutdown: () => Promise.resolve() } });
    const { span, ctx } = startServerSpan(tracing, 'check', contextFromTraceparent(TRACEPARENT));
    const onward = withContext(ctx, () => traceHeaders()).traceparent;
    expect(onward).toBe(`00-4bf92f3577b34da6a3ce929d0e0e4736-${span.spanContext().spanId}-01`);
    span.end();
    // A malformed one starts nothing.
    expect(traceHeaders(contextFromTraceparent('00-zz-zz-01'))).toEqual({});
  });
});
