import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from '../../support/processes';

/**
 * What a Kubernetes Service does for the rolling-upgrade test, at the TCP
 * level: one stable address, each new connection sent to the next ready
 * endpoint in turn. An endpoint is removed before its pod gets SIGTERM (the
 * preStop sleep in the manifests exists for this) and added once its
 * /readyz answers 200; connections already open stay where they are, as
 * with kube-proxy, until either side closes them.
 */
export class TcpService {
  private readonly endpoints: number[] = [];
  private readonly sockets = new Set<Socket>();
  private next = 0;
  /** Connections accepted while no endpoint was ready (closed at once). */
  refused = 0;

  private constructor(
    readonly name: string,
    readonly port: number,
    private readonly server: Server,
  ) {}

  static async start(name: string): Promise<TcpService> {
    const port = await freePort();
    const server = createServer();
    const svc = new TcpService(name, port, server);
    server.on('connection', (client) => svc.route(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return svc;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  add(port: number): void {
    if (!this.endpoints.includes(port)) this.endpoints.push(port);
  }

  remove(port: number): void {
    const i = this.endpoints.indexOf(port);
    if (i >= 0) this.endpoints.splice(i, 1);
  }

  private route(client: Socket): void {
    this.sockets.add(client);
    client.once('close', () => this.sockets.delete(client));
    if (this.endpoints.length === 0) {
      this.refused++;
      client.destroy();
      return;
    }
    const port = this.endpoints[this.next++ % this.endpoints.length]!;
    const upstream = connect(port, '127.0.0.1');
    this.sockets.add(upstream);
    upstream.once('close', () => this.sockets.delete(upstream));
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    // Either side ending or failing ends the other, as a reset through a NAT would.
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', cut);
    upstream.on('error', cut);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
