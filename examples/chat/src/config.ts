import { join, resolve } from 'node:path';

export interface ChatConfig {
  host: string;
  port: number;
  /** The gateway: host-sync fetch, and the public origin of the REST API. */
  relayUrl: string;
  /** Where the page opens its WebSocket: the gateway's /ws (one public origin). */
  relayWsUrl: string;
  /** The registry's admin API, used once to create the demo tenant. */
  registryUrl: string;
  /** ADMIN_TOKEN, else read from DATA_DIR/secrets.env when the tenant must be created. */
  adminToken: string | undefined;
  dataDir: string;
  /** A tenant given in the environment; otherwise DATA_DIR/example-chat.json, created on first run. */
  tenant: { tenantId: string; clientId: string; clientSecret: string } | undefined;
  tokenTtlS: number;
  channel: string;
}

const CHANNEL = /^[A-Za-z0-9_.:-]{1,128}$/;

/** The example's settings, read once; a bad value stops it at start with the allowed range. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ChatConfig {
  const url = (name: string, fallback: string, schemes: string[]): string => {
    const raw = env[name] || fallback;
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      throw new Error(`${name} must be a URL (${schemes.join(' or ')}), got ${JSON.stringify(raw)}`);
    }
    if (!schemes.includes(parsed.protocol)) throw new Error(`${name} must use ${schemes.join(' or ')}, got ${parsed.protocol}`);
    return raw.replace(/\/+$/, '');
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max) throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
    return n;
  };

  const relayUrl = url('RELAY_URL', 'http://127.0.0.1:8080', ['http:', 'https:']);
  const relayWsUrl = url('RELAY_WS_URL', `${relayUrl.replace(/^http/, 'ws')}/ws`, ['ws:', 'wss:']);
  const ids = [env.TENANT_ID, env.HOST_SYNC_CLIENT_ID, env.HOST_SYNC_CLIENT_SECRET];
  if (ids.some(Boolean) && !ids.every(Boolean)) throw new Error('TENANT_ID, HOST_SYNC_CLIENT_ID and HOST_SYNC_CLIENT_SECRET go together: set all three or none');
  const channel = env.CHAT_CHANNEL || 'general';
  if (!CHANNEL.test(channel)) throw new Error(`CHAT_CHANNEL must match ${CHANNEL.source}, got ${JSON.stringify(channel)}`);
  return Object.freeze({
    host: env.CHAT_HOST || '127.0.0.1',
    port: int('CHAT_PORT', 3000, 0, 65535),
    relayUrl,
    relayWsUrl,
    registryUrl: url('REGISTRY_URL', 'http://127.0.0.1:8082', ['http:', 'https:']),
    adminToken: env.ADMIN_TOKEN || undefined,
    dataDir: resolve(env.DATA_DIR || './.data'),
    tenant: env.TENANT_ID ? { tenantId: env.TENANT_ID, clientId: env.HOST_SYNC_CLIENT_ID!, clientSecret: env.HOST_SYNC_CLIENT_SECRET! } : undefined,
    tokenTtlS: int('CHAT_TOKEN_TTL_S', 600, 5, 86_400),
    channel,
  });
}

export function tenantFile(config: ChatConfig): string {
  return join(config.dataDir, 'example-chat.json');
}
