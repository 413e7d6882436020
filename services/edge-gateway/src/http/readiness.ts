import type { ReadinessCheck } from '@service-relay/edge';
import type { VerifierClient } from '@service-relay/verifier-client';

/**
 * Ready when the verifier channel connects and both upstreams answer their
 * /healthz. The tenant feed is not a readiness check: without it the gateway
 * still answers correctly (it only stops caching), and a registry outage would
 * otherwise take every replica out at once. Its state is in /metrics.
 */
export function gatewayReadiness(verifier: VerifierClient, upstreams: Record<string, string | readonly string[]>): ReadinessCheck {
  const checks: Record<string, () => Promise<boolean>> = { verifier: () => verifier.ready() };
  for (const [name, target] of Object.entries(upstreams)) {
    // Replicas of one upstream (REGISTRY_URL a list): any one answering serves the calls (a refused one is skipped).
    checks[name] = typeof target === 'string'
      ? () => reachable(`${target}/healthz`)
      : async () => (await Promise.all(target.map((url) => reachable(`${url}/healthz`)))).some(Boolean);
  }
  return checks;
}

async function reachable(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}
