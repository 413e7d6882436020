import { fileURLToPath } from 'node:url';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The embedded default in this process, exactly as `npm start` runs it
 * (scripts/start-all.ts: every service in one process, PGlite on disk, the
 * in-process cache and bus): `start` sets the environment and imports it.
 * REDIS_URL and DATABASE_URL are removed first, whatever the bench was given.
 */
const START_ALL = fileURLToPath(new URL('../../../scripts/start-all.ts', import.meta.url));

let started = false;

async function start({ env }: { env: Record<string, string> }): Promise<{ ok: true }> {
  if (started) throw new Error('the embedded default is already running in this worker');
  started = true;
  delete process.env.REDIS_URL;
  delete process.env.DATABASE_URL;
  Object.assign(process.env, env);
  await import(START_ALL);
  return { ok: true };
}

// The worker's exit ends the process and with it every service; its DATA_DIR is the caller's to remove.
serveWorker({ start });
