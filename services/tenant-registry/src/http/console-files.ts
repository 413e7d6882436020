import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import type { Request, Response } from 'express';
import { sendError } from '@service-relay/edge';
import { NO_STORE } from './send';

/**
 * The console's Content-Security-Policy: its own scripts, styles and images
 * only, its API calls to this origin only, never framed. Nothing inline.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
};

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

interface ConsoleFile {
  body: Buffer;
  type: string;
  /** Vite's hashed names (assets/) never change; index.html is asked again each time. */
  immutable: boolean;
}

export type ConsoleFiles = ReadonlyMap<string, ConsoleFile>;

/** Reads every file of the built console once, at start: the same bytes for every caller, no data in them. */
export function readConsoleFiles(dir: string): Map<string, ConsoleFile> | undefined {
  if (!existsSync(join(dir, 'index.html'))) return undefined;
  const files = new Map<string, ConsoleFile>();
  const walk = (d: string, depth: number) => {
    if (depth > 4) return;
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path, depth + 1);
      else {
        const rel = relative(dir, path).split(sep).join('/');
        files.set(`/${rel}`, { body: readFileSync(path), type: TYPES[extname(name)] ?? 'application/octet-stream', immutable: rel.startsWith('assets/') });
      }
    }
  };
  walk(dir, 0);
  return files;
}

/**
 * GET /console/…: the operator console's static files (docs/OPERATIONS.md
 * "Operator console"). They are public on this listener, like the login
 * page of any admin tool: they hold no data and no secret (the same bytes
 * as the repository builds); every datum comes from /admin/*, which needs
 * the admin token. Only the files that exist are answered; no directory
 * listing, no fallback, GET and HEAD only.
 */
export function consoleFiles(files: ConsoleFiles): (req: Request, res: Response) => void {
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 'method_not_allowed', { ...NO_STORE, allow: 'GET, HEAD' });
    // Mounted at /console: req.path is what follows it. /console itself goes to /console/ so relative assets resolve.
    if (req.originalUrl.split('?', 1)[0] === '/console') {
      res.writeHead(308, { location: '/console/', ...SECURITY_HEADERS, ...NO_STORE }).end();
      return;
    }
    const file = files.get(req.path === '/' ? '/index.html' : req.path);
    if (!file) return sendError(res, 'not_found', NO_STORE);
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': file.type,
      'content-length': String(file.body.length),
      'cache-control': file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
    });
    res.end(req.method === 'HEAD' ? undefined : file.body);
  };
}
