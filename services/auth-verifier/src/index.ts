export { loadConfig, deriveCacheKey, type VerifierConfig } from './config';
export { createServer, type VerifierDeps, type VerifierServer } from './server';
export { TokenChecker, type CheckResult, type ParsedToken } from './token/token-checker';
export { TokenVerifier, type VerifyOutcome } from './token/token-verifier';
export { REJECT_REASONS, type RejectReason } from './token/reject-reason';
export { buildTenantKeys, type TenantKeys, type TenantKeysData } from './token/tenant-keys';
export { hs256Matches, secretKeyObject } from './token/hs256';
export { CachingKeySource } from './keys/caching-key-source';
export type { KeySource } from './keys/key-source';
