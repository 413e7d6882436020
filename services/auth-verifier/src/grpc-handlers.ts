import type * as grpc from '@grpc/grpc-js';
import { contextFromMetadata, contextFromTraceparent, endSpan, startServerSpan, TRACING_OFF, type Logger, type TraceContext, type Tracing } from '@service-relay/core';
import { grpcError, hasInternalToken, type VerifyRequest, type VerifyResponseWire, type VerifyStreamRequest, type VerifyStreamResponse } from '@service-relay/grpc';
import { toWire } from '@service-relay/verifier-client';
import type { TokenVerifier, VerifyOutcome } from './token/token-verifier';

function wire(outcome: VerifyOutcome): VerifyResponseWire | undefined {
  return 'unavailable' in outcome ? undefined : toWire(outcome);
}

/**
 * relay.auth.v1.TokenVerifier: the transport around TokenVerifier. Only
 * services holding INTERNAL_TOKEN may ask: a verdict's `reason` separates
 * unknown tenants from bad signatures, an oracle no outsider may query.
 */
export function tokenVerifierHandlers(verifier: TokenVerifier, logger: Logger, internalToken: string, tracing: Tracing = TRACING_OFF): grpc.UntypedServiceImplementation {
  // A span around one check, continuing the caller's trace (unary: call
  // metadata; stream: the message's own traceparent). Off: the check itself.
  const check = (token: string, parent: () => TraceContext): VerifyOutcome | Promise<VerifyOutcome> => {
    if (!tracing.enabled) return verifier.verify(token);
    const { span } = startServerSpan(tracing, 'relay.auth.v1.TokenVerifier/Verify', parent(), { 'rpc.system': 'grpc' });
    const done = (outcome: VerifyOutcome) => {
      if ('unavailable' in outcome) endSpan(span, { error: 'unavailable' });
      else {
        span.setAttributes({ 'relay.valid': outcome.valid, ...(outcome.valid ? { 'relay.tenant_id': outcome.identity.tenantId } : { 'relay.reason': outcome.reason }) });
        endSpan(span);
      }
      return outcome;
    };
    const r = verifier.verify(token);
    return r instanceof Promise ? r.then(done) : done(r);
  };
  return {
    Verify(call: grpc.ServerUnaryCall<VerifyRequest, VerifyResponseWire>, cb: grpc.sendUnaryData<VerifyResponseWire>) {
      if (!hasInternalToken(call.metadata, internalToken)) return cb(grpcError('invalid_internal_token'));
      const reply = (outcome: VerifyOutcome) => {
        const res = wire(outcome);
        if (res) cb(null, res);
        else cb(grpcError('unavailable', 'verifier cannot reach key material'));
      };
      const r = check(call.request.token ?? '', () => contextFromMetadata(call.metadata));
      if (r instanceof Promise) void r.then(reply);
      else reply(r);
    },

    VerifyStream(call: grpc.ServerDuplexStream<VerifyStreamRequest, VerifyStreamResponse>) {
      if (!hasInternalToken(call.metadata, internalToken)) {
        // grpc-js ends a server stream with the status of an 'error' it emits.
        call.emit('error', grpcError('invalid_internal_token'));
        return;
      }
      let pending = 0;
      let ended = false;
      let closed = false;
      const finishIfDone = () => {
        if (ended && pending === 0 && !closed) {
          closed = true;
          call.end();
        }
      };
      const send = (id: number, outcome: VerifyOutcome) => {
        if (closed) return;
        const result = wire(outcome);
        call.write({ id, result: result ?? null, unavailable: result === undefined });
      };
      // Each request is answered as soon as its own verdict is ready: one slow
      // key fetch never holds back the checks behind it.
      call.on('data', (req: VerifyStreamRequest) => {
        const r = check(req.token ?? '', () => contextFromTraceparent(req.traceparent));
        if (!(r instanceof Promise)) return send(req.id, r);
        pending++;
        void r.then((outcome) => {
          pending--;
          send(req.id, outcome);
          finishIfDone();
        });
      });
      call.on('end', () => {
        ended = true;
        finishIfDone();
      });
      call.on('error', (err: Error) => {
        closed = true;
        logger.debug({ err: err.message }, 'verify stream error');
      });
      call.on('cancelled', () => {
        closed = true;
      });
    },
  };
}
