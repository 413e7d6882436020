/**
 * One process of hostile HTTP load against the gateway (issue #28 item 5),
 * run by hostile-load.ts as `node --import tsx hostile-load-worker.ts <json>`.
 * Open loop: it offers `rate` requests per second whatever the answers, from
 * each of `addresses` in turn (`lanesPerAddress` keep-alive sockets, default 4, bound to each loopback
 * source address), at most `maxInFlight` sent or waiting for a socket at
 * once (past that an offered request is counted as not sent). The mix is the issue's:
 * - GET /api/v1/me with a token of a random tenant (a well-formed HS256 JWT
 *   whose tenant does not exist: the verifier asks the registry about it);
 * - the host-sync fetch of a random tenant id with random credentials;
 * - the host-sync fetch of a real tenant (`tenantId`) with a wrong secret.
 * It prints `ready` once loaded, starts on SIGUSR2, stops by itself
 * `durationMs` later and prints one JSON line with its counts; a hard exit
 * timer makes sure it never outlives that by much.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';

interface Args {
  gatewayUrl: string;
  rate: number;
  durationMs: number;
  addresses: string[];
  tenantId: string;
  clientId: string;
  maxInFlight: number;
  /** Keep-alive sockets per source address (default 4). */
  lanesPerAddress?: number;
  /** A new connection for every request (closed once answered), as a client without keep-alive. */
  reconnect?: boolean;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const url = new URL(args.gatewayUrl);
// Never outlive the run: answers still pending at the end are abandoned
// (counted from start-up, with room for the wait for the go signal; kept
// referenced, it also keeps the process alive while it waits).
setTimeout(() => process.exit(0), args.durationMs + 35_000);

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** A token a host of a tenant that does not exist could have signed. */
function randomTenantToken(): string {
  const tenant = randomUUID();
  const head = `${b64({ alg: 'HS256', typ: 'JWT', kid: tenant })}.${b64({ iss: 'service-relay', aud: 'service-relay', exp: Math.floor(Date.now() / 1000) + 600, tenant_id: tenant, user_id: randomUUID() })}`;
  return `${head}.${createHmac('sha256', randomBytes(32)).update(head).digest('base64url')}`;
}

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

/**
 * A minimal HTTP/1.1 client on raw keep-alive sockets, one request at a time
 * per socket: node:http's client costs several times the CPU per request,
 * and on a machine this test shares with the stack, the load generator's own
 * cost decides how much load it can offer.
 */
class Lane {
  private socket: Socket | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private onAnswer: ((label: string) => void) | undefined;
  busy = false;

  constructor(private readonly localAddress: string) {}

  send(raw: string, done: (label: string) => void): void {
    this.busy = true;
    this.onAnswer = (label) => {
      this.busy = false;
      this.onAnswer = undefined;
      done(label);
    };
    const s = this.socket ?? this.connect();
    s.write(raw);
  }

  private connect(): Socket {
    const s = connect({ host: url.hostname, port: Number(url.port), localAddress: this.localAddress });
    s.setNoDelay(true);
    s.setTimeout(10_000, () => s.destroy(new Error('timeout')));
    this.buf = Buffer.alloc(0);
    s.on('data', (d: Buffer) => this.data(d));
    s.once('error', (err: NodeJS.ErrnoException) => this.end(err.code ?? err.message));
    s.once('close', () => this.end('closed'));
    this.socket = s;
    return s;
  }

  private end(label: string): void {
    this.socket = undefined;
    this.onAnswer?.(label);
  }

  private data(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    const head = this.buf.indexOf('\r\n\r\n');
    if (head < 0) return;
    const text = this.buf.toString('latin1', 0, head).toLowerCase();
    let end: number;
    if (text.includes('\r\ntransfer-encoding: chunked')) {
      // The answers here are small: the body ends at the first zero-size chunk.
      const last = this.buf.indexOf('\r\n0\r\n\r\n', head + 2);
      if (last < 0) return;
      end = last + 7;
    } else {
      end = head + 4 + Number(/\r\ncontent-length: *(\d+)/.exec(text)?.[1] ?? 0);
      if (this.buf.length < end) return;
    }
    this.buf = this.buf.subarray(end);
    const status = text.slice(9, 12);
    if (args.reconnect || text.includes('\r\nconnection: close')) {
      const s = this.socket;
      this.socket = undefined;
      s?.removeAllListeners('close');
      s?.on('error', () => {});
      s?.destroy();
    }
    this.onAnswer?.(status);
  }
}

const lanes = args.addresses.flatMap((a) => Array.from({ length: args.lanesPerAddress ?? 4 }, () => new Lane(a)));
const counts: Record<string, number> = {};
let sent = 0;
let notSent = 0;
let inFlight = 0;
let queued = 0;
let n = 0;
let cursor = 0;

function rawRequest(): string {
  const kind = n % 4;
  n += 1;
  const host = `host: ${url.host}\r\n`;
  if (kind < 2) return `GET /api/v1/me HTTP/1.1\r\n${host}authorization: Bearer ${randomTenantToken()}\r\n\r\n`;
  const [tenant, id] = kind === 2 ? [randomUUID(), randomUUID()] : [args.tenantId, args.clientId];
  return `POST /api/host/tenants/${tenant}/jwt_secret/fetch HTTP/1.1\r\n${host}authorization: ${basic(id, randomBytes(24).toString('base64url'))}\r\ncontent-length: 0\r\n\r\n`;
}

/** Sends queued requests on idle lanes, taking the addresses in turn. */
function pump(): void {
  for (let tried = 0; queued > 0 && tried < lanes.length; tried++) {
    const lane = lanes[cursor]!;
    cursor = (cursor + 1) % lanes.length;
    if (lane.busy) continue;
    queued -= 1;
    sent += 1;
    inFlight += 1;
    lane.send(rawRequest(), (label) => {
      inFlight -= 1;
      counts[label] = (counts[label] ?? 0) + 1;
      if (queued > 0) pump();
    });
  }
}

// Loaded: say so, and offer nothing until told to start (SIGUSR2), so the
// load begins at one instant for every worker, after their start-up.
let started = 0;
process.once('SIGUSR2', () => {
  started = performance.now();
  tick = setInterval(offer, 5);
});
let tick: NodeJS.Timeout | undefined;
process.stdout.write('ready\n');

function offer(): void {
  const elapsed = performance.now() - started;
  if (elapsed >= args.durationMs) {
    clearInterval(tick);
    finish(elapsed);
    return;
  }
  const due = Math.floor((elapsed / 1000) * args.rate) - sent - notSent - queued;
  for (let i = 0; i < due; i++) {
    // Offered but waiting for a free lane past maxInFlight: the server is not keeping up, dropped.
    if (inFlight + queued >= args.maxInFlight) notSent += 1;
    else queued += 1;
  }
  pump();
}

function finish(elapsed: number): void {
  const report = () => {
    process.stdout.write(`${JSON.stringify({ sent, notSent, pending: inFlight, counts, seconds: elapsed / 1000 })}\n`, () => process.exit(0));
  };
  // Give answers in flight a moment, bounded; then report and exit.
  const until = Date.now() + 2000;
  const wait = setInterval(() => {
    if (inFlight === 0 || Date.now() >= until) {
      clearInterval(wait);
      report();
    }
  }, 20);
}
