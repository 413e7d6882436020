// Re-exported so the verifier's callers import one package: the verdict types
// live in @service-relay/verdict, their wire mapping in @service-relay/grpc.
export type { KeySlot, VerifiedIdentity, VerifyResult } from '@service-relay/verdict';
export { fromWire, toWire } from '@service-relay/grpc';
