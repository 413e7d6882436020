import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from '../../support/processes';

interface Pair {
  client: Socket;
  upstream: Socket | undefined;
  /** Bytes read while blackholed, in order, per direction; forwarded when the cut heals. */
  toUpstream: Buffer[];
  toClient: Buffer[];
}

/**
 * A TCP proxy in front of one address that can be switched to a blackhole: a
 * network partition between one process and one peer, nothing else touched.
 * Blackholed, it accepts connections and reads what arrives but forwards
 * nothing either way and answers nothing (no reset, no FIN), as a dropped
 * route does; connections opened meanwhile are not connected upstream yet.
 * Healed, what was held goes through in order and forwarding resumes, as
 * TCP retransmission would deliver it once the route is back.
 */
export class BlackholeProxy {
  private readonly pairs = new Set<Pair>();
  /** Pairs one side of which ended while blackholed. */
  private readonly ended = new Set<Pair>();
  private holed = false;
  /** Connections accepted while blackholed (for the report). */
  heldConnections = 0;

  private constructor(
    private readonly target: { host: string; port: number },
    readonly port: number,
    private readonly server: Server,
  ) {}

  /** `target` is `host:port`. */
  static async start(target: string): Promise<BlackholeProxy> {
    const i = target.lastIndexOf(':');
    const port = await freePort();
    const server = createServer();
    const proxy = new BlackholeProxy({ host: target.slice(0, i), port: Number(target.slice(i + 1)) }, port, server);
    server.on('connection', (client) => proxy.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get blackholed(): boolean {
    return this.holed;
  }

  /** From now on nothing is forwarded in either direction. */
  blackhole(): void {
    this.holed = true;
  }

  /** Forwards what was held, connects what was accepted meanwhile, and forwards from now on. */
  heal(): void {
    if (!this.holed) return;
    this.holed = false;
    for (const p of this.ended) this.drop(p);
    this.ended.clear();
    for (const p of this.pairs) {
      if (!p.upstream) this.connectUpstream(p);
      this.flush(p);
    }
  }

  async stop(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream?.destroy();
    }
    this.pairs.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const pair: Pair = { client, upstream: undefined, toUpstream: [], toClient: [] };
    this.pairs.add(pair);
    client.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      if (this.holed || !pair.upstream) pair.toUpstream.push(chunk);
      else pair.upstream.write(chunk);
    });
    const end = () => this.drop(pair);
    client.on('error', end);
    client.on('close', end);
    if (this.holed) this.heldConnections++;
    else this.connectUpstream(pair);
  }

  private connectUpstream(pair: Pair): void {
    const upstream = connect(this.target.port, this.target.host);
    pair.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('connect', () => this.flush(pair));
    upstream.on('data', (chunk: Buffer) => {
      if (this.holed) pair.toClient.push(chunk);
      else pair.client.write(chunk);
    });
    const end = () => this.drop(pair);
    upstream.on('error', end);
    upstream.on('close', end);
  }

  private flush(pair: Pair): void {
    const up = pair.upstream;
    if (this.holed || !up || up.connecting) return;
    for (const chunk of pair.toUpstream.splice(0)) up.write(chunk);
    for (const chunk of pair.toClient.splice(0)) pair.client.write(chunk);
  }

  /** Either side ending ends the other; while blackholed that news waits for the heal, as a FIN would. */
  private drop(pair: Pair): void {
    if (this.holed) {
      this.ended.add(pair);
      return;
    }
    if (!this.pairs.delete(pair)) return;
    pair.client.destroy();
    pair.upstream?.destroy();
  }
}
