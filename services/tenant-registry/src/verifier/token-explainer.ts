import type * as grpc from '@grpc/grpc-js';
import { RelayError } from '@service-relay/core';
import { internalClient, internalMetadata, VERIFIER_PROTO, VERIFIER_SERVICE, type ExplainResponseWire, type UnaryMethod } from '@service-relay/grpc';

/** What the admin API answers for explain_token. */
export interface TokenExplanation {
  valid: boolean;
  /** The verifier's reason code; null when valid. */
  reason: string | null;
  meaning: string | null;
  fix: string | null;
  /** The decoded header and claims; null when a segment is not a JSON object. */
  header: Record<string, unknown> | null;
  claims: Record<string, unknown> | null;
  /** When valid: the key slot and version that matched. */
  key_slot?: 'primary' | 'previous';
  key_version?: number;
}

export interface TokenExplainer {
  explain(token: string): Promise<TokenExplanation>;
  close(): void;
}

type ExplainClient = grpc.Client & { Explain: UnaryMethod<{ token: string }, ExplainResponseWire> };

/**
 * The registry's caller of relay.auth.v1.TokenVerifier/Explain: the verifier
 * judges, the registry only passes the answer to an authenticated operator.
 * The channel connects on the first call.
 */
export function createTokenExplainer(opts: { address: string; internalToken: string; deadlineMs: number }): TokenExplainer {
  let client: ExplainClient | undefined;
  return {
    explain(token) {
      client ??= internalClient<Pick<ExplainClient, 'Explain'>>(VERIFIER_PROTO, VERIFIER_SERVICE, opts.address);
      const c = client;
      return new Promise((resolve, reject) => {
        c.Explain({ token }, internalMetadata(opts.internalToken), { deadline: Date.now() + opts.deadlineMs }, (err, res) => {
          if (err || !res?.verdict) return reject(new RelayError('unavailable', 'the auth-verifier did not answer the explanation'));
          resolve(toExplanation(res));
        });
      });
    },
    close() {
      client?.close();
    },
  };
}

function toExplanation(res: ExplainResponseWire): TokenExplanation {
  const v = res.verdict!;
  const base = { header: parseObject(res.header_json), claims: parseObject(res.claims_json) };
  if (v.valid) return { valid: true, reason: null, meaning: null, fix: null, ...base, key_slot: v.key_slot === 'KEY_SLOT_PREVIOUS' ? 'previous' : 'primary', key_version: v.key_version };
  return { valid: false, reason: v.reason, meaning: res.meaning || null, fix: res.fix || null, ...base };
}

function parseObject(json: string): Record<string, unknown> | null {
  if (!json) return null;
  try {
    return JSON.parse(json) as Record<string, unknown>;
  } catch {
    return null;
  }
}
