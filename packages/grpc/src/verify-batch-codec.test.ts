import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROTO_OPTIONS, serviceDefinition, VERIFIER_PROTO, VERIFIER_SERVICE } from './protos';
import { encodeVerifyBatchResponse } from './verify-batch-codec';
import type { VerifyBatchResponse, VerifyResponseWire } from './verifier-wire';

/** proto-loader's own codec of the message (what the verifier used before, and what every caller decodes with). */
const library = (() => {
  const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(VERIFIER_PROTO, PROTO_OPTIONS)) as unknown as {
    relay: { auth: { v1: { TokenVerifier: grpc.ServiceClientConstructor } } };
  };
  return pkg.relay.auth.v1.TokenVerifier.service.VerifyBatchStream!;
})();
const decode = (b: Buffer) => library.responseDeserialize(b) as VerifyBatchResponse;

const int64 = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 2 ** 31 }), fc.maxSafeInteger().filter((n) => n >= 0), fc.integer({ min: -(2 ** 31), max: -1 }), fc.constant(Number.MIN_SAFE_INTEGER));
const text = fc.oneof(fc.constant(''), fc.uuid(), fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 20 }));
const verdict: fc.Arbitrary<VerifyResponseWire> = fc.record({
  valid: fc.boolean(),
  tenant_id: text,
  user_id: text,
  expires_at: int64,
  key_slot: fc.constantFrom('KEY_SLOT_UNSPECIFIED', 'KEY_SLOT_PRIMARY', 'KEY_SLOT_PREVIOUS'),
  key_version: int64,
  reason: text,
  cap_json: text,
  issued_at: int64,
  as_of_seq: int64,
});
const batch: fc.Arbitrary<VerifyBatchResponse> = fc.record({
  results: fc.array(fc.record({ id: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 }), fc.maxSafeInteger().filter((n) => n >= 0)), result: fc.option(verdict, { nil: null }), unavailable: fc.boolean() }), { maxLength: 40 }),
});

describe('encodeVerifyBatchResponse', () => {
  it('decodes (with protobufjs, as every caller does) to what the library serializer’s bytes decode to', () => {
    fc.assert(
      fc.property(batch, (msg) => {
        expect(decode(encodeVerifyBatchResponse(msg))).toEqual(decode(library.responseSerialize(msg)));
      }),
      { numRuns: 500 },
    );
  });

  it('a valid verdict round-trips field by field', () => {
    const v: VerifyResponseWire = { valid: true, tenant_id: 'b1d0c3a2-0000-4000-8000-000000000001', user_id: 'ü-user', expires_at: 1_900_000_000, key_slot: 'KEY_SLOT_PREVIOUS', key_version: 3, reason: '', cap_json: '{"s":["a"]}', issued_at: 1_899_999_000, as_of_seq: 2 ** 40 };
    expect(decode(encodeVerifyBatchResponse({ results: [{ id: 7, result: v, unavailable: false }, { id: 8, result: null, unavailable: true }] }))).toEqual({
      results: [
        { id: 7, result: v, unavailable: false },
        { id: 8, result: null, unavailable: true },
      ],
    });
  });

  it('is the verifier service definition’s VerifyBatchStream serializer', () => {
    expect(serviceDefinition(VERIFIER_PROTO, VERIFIER_SERVICE).VerifyBatchStream!.responseSerialize).toBe(encodeVerifyBatchResponse);
  });
});
