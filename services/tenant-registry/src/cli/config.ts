import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseEnvFile, type Env } from '@service-relay/core';

export interface CliConfig {
  registryUrl: string;
  /** From ADMIN_TOKEN, else from DATA_DIR/secrets.env (the embedded default). */
  adminToken: string | undefined;
  /** Where the token was looked for, for the error message when it is missing. */
  secretsFile: string;
  /** Where relative file arguments are read from: the operator's directory (npm runs scripts from the repository root). */
  workDir?: string;
}

/** The admin CLI's settings: the only env reading of the CLI. */
export function loadCliConfig(env: Env = process.env): CliConfig {
  const registryUrl = (env.REGISTRY_URL || 'http://127.0.0.1:8082').replace(/\/+$/, '');
  const secretsFile = join(resolve(env.DATA_DIR || './.data'), 'secrets.env');
  let adminToken = env.ADMIN_TOKEN || undefined;
  if (adminToken === undefined && existsSync(secretsFile)) adminToken = parseEnvFile(readFileSync(secretsFile, 'utf8')).ADMIN_TOKEN || undefined;
  return { registryUrl, adminToken, secretsFile, workDir: env.INIT_CWD || process.cwd() };
}
