import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { ConfigError, DEFAULT_BIND_HOST, processEnvironment, type Env } from './config';
import { createLogger } from './logger';
import { pinTickObjectShape } from './tick-shape';

/** What every service's createServer(deps) returns. */
export interface Service {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The one line a failed start prints: the config error as it is, a busy port with what to do about it. */
export function startupFailure(err: unknown): string {
  if (err instanceof ConfigError) return err.message;
  const message = err instanceof Error ? err.message : String(err);
  if ((err as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE') {
    return (
      `startup failed: ${message}: another process already listens there. ` +
      'Most likely service-relay is already running (a second `npm start`?): use that one, or stop it (Ctrl-C in its terminal); ' +
      'to run both, give this one other ports (GATEWAY_PORT, REALTIME_PORT, REGISTRY_HTTP_PORT, REGISTRY_GRPC_PORT, VERIFIER_GRPC_PORT, VERIFIER_HTTP_PORT, GATEWAY_OPS_PORT, REALTIME_OPS_PORT, REGISTRY_OPS_PORT).'
    );
  }
  return `startup failed: ${message}`;
}

/**
 * Runs `main`, turning a ConfigError into one line on stderr and exit 1, and
 * stops the returned services in order on SIGTERM/SIGINT (exit 0), with a
 * deadline so a stuck dependency cannot hold the process forever.
 */
export async function runMain(main: () => Promise<{ stop(): Promise<void> }>, opts: { logger?: Logger; graceMs?: number } = {}): Promise<void> {
  // A service that goes quiet must not come back with a slower nextTick (see there).
  pinTickObjectShape();
  let running: { stop(): Promise<void> };
  try {
    running = await main();
  } catch (err) {
    process.stderr.write(`${startupFailure(err)}\n`);
    process.exit(1);
  }
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    opts.logger?.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      opts.logger?.error('shutdown deadline passed, exiting');
      process.exit(1);
    }, opts.graceMs ?? 10_000);
    timer.unref();
    running.stop().then(
      () => {
        opts.logger?.flush?.();
        process.exit(0);
      },
      (err: unknown) => {
        opts.logger?.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  // `on`, not `once`: Ctrl-C reaches the process twice under npm (the terminal
  // signals the process group, and npm forwards its own copy). With no listener
  // left, the second SIGINT would kill the process mid-shutdown, cutting every
  // WebSocket without its 1001 close. Repeats are ignored; the deadline bounds it.
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

/** Binds `server`; the host defaults to loopback so nothing is exposed by accident (config passes the real one). */
/** What a service module gives runService: its one config loader and its server factory. */
export interface ServiceModule<C extends { logLevel: string }> {
  /** The service name in logs and metrics. */
  name: string;
  loadConfig(env: Env, opts: { standalone: boolean }): C;
  createServer(config: C, deps: { logger: Logger }): Service;
}

/**
 * The one way a service runs alone (`npm start -w services/<name>`): its
 * configuration from the process environment (the only place that reads it;
 * standalone, so REDIS_URL is required), a logger, the server, and
 * runMain's signal handling. Every main.ts is this call.
 */
export function runService<C extends { logLevel: string }>(m: ServiceModule<C>): Promise<void> {
  return runMain(async () => {
    const config = m.loadConfig(processEnvironment(), { standalone: true });
    const logger = createLogger({ service: m.name, level: config.logLevel });
    const server = m.createServer(config, { logger });
    await server.start();
    return server;
  });
}

/**
 * The accept queue asked for (the kernel caps it at net.core.somaxconn).
 * Node's default of 511 overflowed when an attacker opened 2,028 connections
 * at once (tests/faults/overload.test.ts with FAULTS_OVERLOAD_LANES=52): the
 * kernel dropped SYNs, and a valid client's new connection waited out TCP's
 * 1 s and 3 s retransmits.
 */
export const LISTEN_BACKLOG = 4096;

export function listen(server: Server, port: number, host = DEFAULT_BIND_HOST): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, backlog: LISTEN_BACKLOG }, () => {
      server.off('error', reject);
      const addr = server.address();
      resolve(typeof addr === 'object' && addr ? addr.port : port);
    });
  });
}

/**
 * Stops accepting, ends idle keep-alive sockets at once and cuts whatever is
 * still open after `graceMs`, so close() cannot wait on a slow client forever.
 * Node keeps serving requests on a kept-alive connection that is busy when
 * close() is called, for as long as its client sends them (a proxy in front
 * under steady load does), and then cutting it at the grace loses the request
 * in flight. So every answer from now on says `Connection: close`: each busy
 * connection ends after its next answer, and its client opens a new one
 * (to another instance).
 */
export function closeServer(server: Server, graceMs = 2000): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.prependListener('request', (_req, res) => {
      res.shouldKeepAlive = false;
      res.setHeader('connection', 'close');
    });
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    timer.unref();
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
