import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { bindServer, grpcError, hasInternalToken, INTERNAL_TOKEN_METADATA, serviceDefinition, stopServer, toWire, VERIFIER_PROTO, VERIFIER_SERVICE } from '@service-relay/grpc';
import type { VerifiedIdentity, VerifyResult } from '@service-relay/verdict';

/**
 * A real gRPC relay.auth.v1.TokenVerifier whose verdicts come from a map
 * token → identity, so tests of the verifier's callers choose tenant, user,
 * exp and key version without the real verifier. Unknown tokens are invalid;
 * `unavailable` makes every check fail the way an unreachable registry does.
 */
export class FakeVerifier {
  private readonly identities = new Map<string, VerifiedIdentity>();
  private readonly server = new grpc.Server();
  /** When true, Verify answers UNAVAILABLE and VerifyStream answers `unavailable`. */
  unavailable = false;
  /** When true, checks are never answered (callers hit their deadline). */
  silent = false;
  /** Checks of these tokens are never answered (only theirs: others are answered as usual). */
  readonly silentFor = new Set<string>();
  /** How many checks were asked for (both RPCs). */
  calls = 0;
  /**
   * The tenant-feed position every valid verdict says it reflects. The fake
   * has no state to fall behind, so by default its verdicts reflect every
   * change (a test of a stale verifier sets a lower one).
   */
  asOfSeq = Number.MAX_SAFE_INTEGER;
  /** The x-internal-token each call carried (undefined when it had none), newest last. */
  readonly internalTokensSeen: (string | undefined)[] = [];
  private boundPort = 0;

  /**
   * With `internalToken`, calls without it are refused UNAUTHENTICATED like
   * the real verifier; without, any caller is answered (and what it sent is
   * recorded in internalTokensSeen).
   */
  constructor(private readonly opts: { internalToken?: string } = {}) {
    this.server.addService(serviceDefinition(VERIFIER_PROTO, VERIFIER_SERVICE), {
      Verify: (call: grpc.ServerUnaryCall<{ token: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        if (!this.admitted(call.metadata)) return cb(grpcError('invalid_internal_token'));
        this.calls += 1;
        if (this.silent || this.silentFor.has(call.request.token)) return;
        if (this.unavailable) return cb({ code: grpc.status.UNAVAILABLE, details: 'unavailable' });
        cb(null, toWire(this.verdict(call.request.token)));
      },
      VerifyStream: (call: grpc.ServerDuplexStream<{ id: number; token: string }, unknown>) => {
        if (!this.admitted(call.metadata)) {
          call.emit('error', grpcError('invalid_internal_token'));
          return;
        }
        call.on('data', (req: { id: number; token: string }) => {
          this.calls += 1;
          if (this.silent || this.silentFor.has(req.token)) return;
          if (this.unavailable) call.write({ id: req.id, result: null, unavailable: true });
          else call.write({ id: req.id, result: toWire(this.verdict(req.token)), unavailable: false });
        });
        call.on('end', () => call.end());
        call.on('error', () => {});
      },
    });
  }

  /** Makes `token` verify as `identity` (replacing any earlier verdict); its `cap`, if any, goes over the wire as cap_json. */
  allow(token: string, identity: VerifiedIdentity): this {
    this.identities.set(token, identity);
    return this;
  }

  /** Makes `token` invalid from now on. */
  deny(token: string): this {
    this.identities.delete(token);
    return this;
  }

  /** Binds to 127.0.0.1 on a free port; returns host:port. */
  async start(): Promise<string> {
    this.boundPort = await bindServer(this.server, '127.0.0.1:0');
    return this.address;
  }

  get address(): string {
    return `127.0.0.1:${this.boundPort}`;
  }

  stop(): Promise<void> {
    return stopServer(this.server, 500);
  }

  private admitted(metadata: grpc.Metadata): boolean {
    const sent = metadata.get(INTERNAL_TOKEN_METADATA)[0];
    this.internalTokensSeen.push(typeof sent === 'string' ? sent : undefined);
    return this.opts.internalToken === undefined || hasInternalToken(metadata, this.opts.internalToken);
  }

  private verdict(token: string): VerifyResult {
    const identity = this.identities.get(token);
    return identity ? { valid: true, identity: { asOfSeq: this.asOfSeq, ...identity } } : { valid: false, reason: 'unknown_token' };
  }
}

/** An identity with fresh random ids, valid for an hour unless overridden. */
export function fakeIdentity(overrides: Partial<VerifiedIdentity> = {}): VerifiedIdentity {
  return {
    tenantId: randomUUID(),
    userId: randomUUID(),
    expiresAt: Math.floor(Date.now() / 1000) + 3600,
    keySlot: 'primary',
    keyVersion: 1,
    ...overrides,
  };
}
