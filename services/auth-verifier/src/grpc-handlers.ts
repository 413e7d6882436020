import type * as grpc from '@grpc/grpc-js';
import { contextFromMetadata, contextFromTraceparent, endSpan, startServerSpan, TRACING_OFF, type Logger, type TraceContext, type Tracing } from '@service-relay/core';
import {
  type ExplainRequest,
  type ExplainResponseWire,
  grpcError,
  hasInternalToken,
  MAX_VERIFY_BATCH,
  type VerifyBatchRequest,
  type VerifyBatchResponse,
  type VerifyRequest,
  type VerifyResponseWire,
  type VerifyStreamRequest,
  type VerifyStreamResponse,
  toWire,
} from '@service-relay/grpc';
import { REJECT_EXPLANATIONS } from './token/reject-explanation';
import type { RejectReason } from './token/reject-reason';
import { decodeForDisplay } from './token/token-display';
import type { TokenVerifier, VerifyOutcome } from './token/token-verifier';

function wire(outcome: VerifyOutcome): VerifyResponseWire | undefined {
  return 'unavailable' in outcome ? undefined : toWire(outcome);
}

/** A malformed or negative position asks for nothing (0); the verdict still says what it reflects. */
function minSeqOf(req: VerifyStreamRequest): number {
  const n = Number(req.min_seq ?? 0);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

function answer(id: number, outcome: VerifyOutcome): VerifyStreamResponse {
  const result = wire(outcome);
  return { id, result: result ?? null, unavailable: result === undefined };
}

/**
 * relay.auth.v1.TokenVerifier: the transport around TokenVerifier. Only
 * services holding INTERNAL_TOKEN may ask: a verdict's `reason` separates
 * unknown tenants from bad signatures, an oracle no outsider may query.
 */
export function tokenVerifierHandlers(verifier: TokenVerifier, logger: Logger, acceptedTokens: string | readonly string[], tracing: Tracing = TRACING_OFF): grpc.UntypedServiceImplementation {
  // A span around one check, continuing the caller's trace (unary: call
  // metadata; stream: the message's own traceparent). Off: the check itself.
  const check = (token: string, parent: () => TraceContext, minSeq = 0): VerifyOutcome | Promise<VerifyOutcome> => {
    if (!tracing.enabled) return verifier.verify(token, minSeq);
    const { span } = startServerSpan(tracing, 'relay.auth.v1.TokenVerifier/Verify', parent(), { 'rpc.system': 'grpc' });
    const done = (outcome: VerifyOutcome) => {
      if ('unavailable' in outcome) endSpan(span, { error: 'unavailable' });
      else {
        span.setAttributes({ 'relay.valid': outcome.valid, ...(outcome.valid ? { 'relay.tenant_id': outcome.identity.tenantId } : { 'relay.reason': outcome.reason }) });
        endSpan(span);
      }
      return outcome;
    };
    const r = verifier.verify(token, minSeq);
    return r instanceof Promise ? r.then(done) : done(r);
  };
  return {
    Verify(call: grpc.ServerUnaryCall<VerifyRequest, VerifyResponseWire>, cb: grpc.sendUnaryData<VerifyResponseWire>) {
      if (!hasInternalToken(call.metadata, acceptedTokens)) return cb(grpcError('invalid_internal_token'));
      const reply = (outcome: VerifyOutcome) => {
        const res = wire(outcome);
        if (res) cb(null, res);
        else cb(grpcError('unavailable', 'verifier cannot reach key material'));
      };
      const r = check(call.request.token ?? '', () => contextFromMetadata(call.metadata));
      if (r instanceof Promise) void r.then(reply);
      else reply(r);
    },

    // For operators (the registry's admin explain_token): the same check, its
    // reason explained, the token decoded. Never logs the token.
    Explain(call: grpc.ServerUnaryCall<ExplainRequest, ExplainResponseWire>, cb: grpc.sendUnaryData<ExplainResponseWire>) {
      if (!hasInternalToken(call.metadata, acceptedTokens)) return cb(grpcError('invalid_internal_token'));
      const token = call.request.token ?? '';
      void verifier.explain(token).then((outcome) => {
        const verdict = wire(outcome);
        if (!verdict) return cb(grpcError('unavailable', 'verifier cannot reach key material'));
        const why = verdict.valid ? undefined : REJECT_EXPLANATIONS[verdict.reason as RejectReason];
        const decoded = decodeForDisplay(token);
        cb(null, { verdict, meaning: why?.meaning ?? '', fix: why?.fix ?? '', header_json: decoded.headerJson, claims_json: decoded.claimsJson });
      });
    },

    VerifyStream(call: grpc.ServerDuplexStream<VerifyStreamRequest, VerifyStreamResponse>) {
      if (!hasInternalToken(call.metadata, acceptedTokens)) {
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
        call.write(answer(id, outcome));
      };
      // Each request is answered as soon as its own verdict is ready: one slow
      // key fetch never holds back the checks behind it.
      call.on('data', (req: VerifyStreamRequest) => {
        const r = check(req.token ?? '', () => contextFromTraceparent(req.traceparent), minSeqOf(req));
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

    // VerifyStream with up to MAX_VERIFY_BATCH checks per message. Each check
    // is the same check() as above (rules, metrics, span, `unavailable`);
    // only the framing differs. The checks a request's message decides at once
    // go back in one response; one waiting for key material is answered when
    // it is ready, with the others that became ready on the same turn of the
    // event loop, so it never holds back the rest.
    VerifyBatchStream(call: grpc.ServerDuplexStream<VerifyBatchRequest, VerifyBatchResponse>) {
      if (!hasInternalToken(call.metadata, acceptedTokens)) {
        call.emit('error', grpcError('invalid_internal_token'));
        return;
      }
      let pending = 0;
      let ended = false;
      let closed = false;
      let later: VerifyStreamResponse[] = [];
      let flushing = false;
      const finishIfDone = () => {
        if (ended && pending === 0 && !flushing && !closed) {
          closed = true;
          call.end();
        }
      };
      const flushLater = () => {
        flushing = false;
        const results = later;
        later = [];
        if (!closed && results.length > 0) call.write({ results });
        finishIfDone();
      };
      call.on('data', (req: VerifyBatchRequest) => {
        if (closed) return;
        const checks = req.checks ?? [];
        if (checks.length > MAX_VERIFY_BATCH) {
          // A caller that ignores the bound fails all its checks on this
          // stream, visibly: nothing of the batch is judged.
          closed = true;
          call.emit('error', grpcError('bad_request', `a VerifyBatchRequest carries at most ${MAX_VERIFY_BATCH} checks; this one carried ${checks.length}`));
          return;
        }
        const now: VerifyStreamResponse[] = [];
        for (const c of checks) {
          const r = check(c.token ?? '', () => contextFromTraceparent(c.traceparent), minSeqOf(c));
          if (!(r instanceof Promise)) {
            now.push(answer(c.id, r));
            continue;
          }
          pending++;
          void r.then((outcome) => {
            pending--;
            later.push(answer(c.id, outcome));
            if (!flushing) {
              flushing = true;
              setImmediate(flushLater);
            }
          });
        }
        if (now.length > 0) call.write({ results: now });
      });
      call.on('end', () => {
        ended = true;
        finishIfDone();
      });
      call.on('error', (err: Error) => {
        closed = true;
        logger.debug({ err: err.message }, 'verify batch stream error');
      });
      call.on('cancelled', () => {
        closed = true;
      });
    },
  };
}
