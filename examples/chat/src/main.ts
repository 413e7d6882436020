/**
 * `npm run example`: the chat example against a running relay (`npm start`).
 * The first run creates a demo tenant through the admin API and saves its
 * host-sync credential in DATA_DIR/example-chat.json; later runs reuse it.
 */
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createHostClient, isHostClientError, type HostClient } from '@service-relay/host';
import { createChatApp } from './app';
import { loadConfig, tenantFile, type ChatConfig } from './config';
import { createDemoTenant, savedTenant, type TenantCredential } from './demo-tenant';

/** The client SDK's ESM build (packages/client/dist, built by `npm ci`), served to the page at /sdk/. */
function clientSdkDir(): string {
  let entry: string | undefined;
  try {
    entry = fileURLToPath(import.meta.resolve('@service-relay/client'));
  } catch {
    // not built
  }
  if (entry === undefined || !existsSync(entry)) throw new Error('the client SDK is not built: npm run build -w @service-relay/client (npm ci does it)');
  return dirname(entry);
}

function hostClientFor(config: ChatConfig, t: TenantCredential): HostClient {
  return createHostClient({
    baseUrl: config.relayUrl,
    tenantId: t.tenantId,
    clientId: t.clientId,
    clientSecret: t.clientSecret,
    onRefreshError: (err) => console.error(`chat: secret refresh failed (${err.code}); signing with the cached secret`),
  });
}

/** A saved tenant that no longer exists (the relay's data was wiped) is replaced by a new one. */
async function connectHost(config: ChatConfig): Promise<{ tenant: TenantCredential; host: HostClient }> {
  let tenant = savedTenant(config) ?? (await createDemoTenant(config));
  let host = hostClientFor(config, tenant);
  try {
    await host.refresh();
  } catch (err) {
    if (!(isHostClientError(err) && err.code === 'invalid_credentials' && tenant.source === 'file')) throw err;
    host.close();
    console.error(`chat: the tenant saved in ${tenantFile(config)} is not known to the relay any more; creating a new one`);
    tenant = await createDemoTenant(config);
    host = hostClientFor(config, tenant);
    await host.refresh();
  }
  return { tenant, host };
}

async function main(): Promise<void> {
  const config = loadConfig();
  const sdkDir = clientSdkDir();
  const { tenant, host } = await connectHost(config);
  const app = createChatApp({ config, tenantId: tenant.tenantId, host, clientSdkDir: sdkDir });
  const server = app.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  const { port } = server.address() as AddressInfo;
  const where = { environment: 'from the environment', file: `read from ${tenantFile(config)}`, created: `created, saved in ${tenantFile(config)}` }[tenant.source];
  process.stdout.write(
    [
      '',
      `chat example on http://${config.host}:${port}/`,
      `  tenant     ${tenant.tenantId} (${where})`,
      `  relay      ${config.relayUrl}; WebSocket ${config.relayWsUrl}`,
      `  tokens     ${config.tokenTtlS} s, refreshed in place by the page`,
      '',
    ].join('\n'),
  );
  const stop = () => {
    host.close();
    server.closeAllConnections();
    server.close(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  console.error(`chat: ${startFailure(err)}`);
  process.exit(1);
});

/** Why the example could not start; a relay that does not answer is most often one not started yet. */
function startFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const cause = (err as { cause?: { code?: string; cause?: { code?: string } } }).cause;
  const refused = [cause?.code, cause?.cause?.code].some((c) => c === 'ECONNREFUSED' || c === 'ECONNRESET' || c === 'ENOTFOUND');
  if ((isHostClientError(err) && err.code === 'unavailable') || refused) {
    return `cannot reach service-relay (${message}). Is it running? Start it with \`npm start\` in another terminal, wait for "service-relay is running", then run \`npm run example\` again.`;
  }
  return message;
}
