import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ManagedProcess } from '../../support/processes';
import { track } from '../../faults/support/backends';
import { runCli } from './redis-cluster';

/** The one name the Redis servers' certificate holds (no IP address): clients must say it (REDIS_TLS_SERVERNAME). */
export const REDIS_TLS_NAME = 'redis.relay.test';

/** PEM files made with openssl for one test file, removed by cleanup(). */
export interface TestCerts {
  dir: string;
  /** The CA that signs everything below. */
  ca: string;
  /** Another CA, which signed nothing here: trusting it instead must fail. */
  otherCa: string;
  /** Every Redis server's certificate (serverAuth and clientAuth: replicas and sentinels present it too), for REDIS_TLS_NAME only. */
  redisCert: string;
  redisKey: string;
  /** The services' client certificate, for servers with `tls-auth-clients yes`. */
  clientCert: string;
  clientKey: string;
  /** PostgreSQL's certificate, for 127.0.0.1 and localhost. */
  pgCert: string;
  pgKey: string;
  cleanup(): void;
}

function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { cwd, timeout: 30_000, env: { PATH: process.env.PATH ?? '' } }, (err, _stdout, stderr) => (err ? reject(new Error(`openssl ${args.join(' ')}: ${err.message}\n${stderr}`)) : resolve()));
  });
}

/** A CA, and leaf certificates it signs (P-256 keys, valid two days). */
export async function makeTestCerts(): Promise<TestCerts> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-tls-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const ca = async (name: string) => {
    await openssl(['req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=${name}`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  };
  const leaf = async (name: string, cn: string, ext: string[]) => {
    writeFileSync(join(dir, `${name}.ext`), `${ext.join('\n')}\n`);
    await openssl(['req', '-new', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
    await openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`], dir);
  };
  await ca('ca');
  await ca('other-ca');
  await leaf('redis', REDIS_TLS_NAME, [`subjectAltName=DNS:${REDIS_TLS_NAME}`, 'extendedKeyUsage=serverAuth,clientAuth']);
  await leaf('client', 'relay-service', ['extendedKeyUsage=clientAuth']);
  await leaf('pg', 'localhost', ['subjectAltName=IP:127.0.0.1,DNS:localhost', 'extendedKeyUsage=serverAuth']);
  const f = (name: string) => join(dir, name);
  return {
    dir,
    ca: f('ca.crt'),
    otherCa: f('other-ca.crt'),
    redisCert: f('redis.crt'),
    redisKey: f('redis.key'),
    clientCert: f('client.crt'),
    clientKey: f('client.key'),
    pgCert: f('pg.crt'),
    pgKey: f('pg.key'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** redis-server's TLS arguments: TLS only (no plain port), client certificates required, replication over TLS. */
function tlsArgs(certs: TestCerts, tlsPort: number): string[] {
  return [
    '--port', '0', '--tls-port', `${tlsPort}`, '--tls-cert-file', certs.redisCert, '--tls-key-file', certs.redisKey, '--tls-ca-cert-file', certs.ca,
    '--tls-auth-clients', 'yes', '--tls-replication', 'yes',
    '--bind', '127.0.0.1', '--protected-mode', 'no', '--save', '', '--appendonly', 'no',
  ];
}

/** Redis processes with TLS on loopback: one server, a Sentinel group or a Cluster. Stopped by their own PIDs. */
export class TlsRedis {
  private constructor(
    readonly url: string,
    private readonly procs: ManagedProcess[],
    private readonly dir: string,
  ) {}

  /** rediss://127.0.0.1:<port> */
  static async single(certs: TestCerts): Promise<TlsRedis> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'relay-tls-redis-'));
    const proc = track(new ManagedProcess('redis-tls', 'redis-server', [...tlsArgs(certs, port), '--dir', dir], {}));
    const r = new TlsRedis(`rediss://127.0.0.1:${port}`, [proc], dir);
    proc.start();
    await proc.waitForOutput('Ready to accept connections', 15_000).catch(async (err: unknown) => {
      await r.stop();
      throw err;
    });
    return r;
  }

  /** rediss-sentinel://127.0.0.1:<sentinel>/relay: one master and one sentinel (quorum 1), both TLS only. */
  static async sentinel(certs: TestCerts): Promise<TlsRedis> {
    const [master, sentinel] = [await freePort(), await freePort()];
    const dir = mkdtempSync(join(tmpdir(), 'relay-tls-sentinel-'));
    const procs = [track(new ManagedProcess('redis-tls-master', 'redis-server', [...tlsArgs(certs, master), '--dir', dir], {}))];
    const r = new TlsRedis(`rediss-sentinel://127.0.0.1:${sentinel}/relay`, procs, dir);
    try {
      procs[0]!.start();
      await procs[0]!.waitForOutput('Ready to accept connections', 15_000);
      const conf = join(dir, 'sentinel.conf');
      writeFileSync(conf, [
        'port 0', `tls-port ${sentinel}`, 'bind 127.0.0.1', 'protected-mode no', `dir ${dir}`,
        `tls-cert-file ${certs.redisCert}`, `tls-key-file ${certs.redisKey}`, `tls-ca-cert-file ${certs.ca}`, 'tls-auth-clients yes', 'tls-replication yes',
        `sentinel monitor relay 127.0.0.1 ${master} 1`, 'sentinel down-after-milliseconds relay 1000', '',
      ].join('\n'));
      const s = track(new ManagedProcess('sentinel-tls', 'redis-server', [conf, '--sentinel'], {}));
      procs.push(s);
      s.start();
      await s.waitForOutput('+monitor master relay', 15_000);
      return r;
    } catch (err) {
      await r.stop();
      throw err;
    }
  }

  /** rediss-cluster://127.0.0.1:<p1>,…: three TLS-only masters, the cluster bus over TLS too. */
  static async cluster(certs: TestCerts): Promise<TlsRedis> {
    const dir = mkdtempSync(join(tmpdir(), 'relay-tls-cluster-'));
    const ports: number[] = [];
    const procs: ManagedProcess[] = [];
    const r = () => new TlsRedis(`rediss-cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`, procs, dir);
    try {
      for (let i = 0; i < 3; i++) {
        const [port, bus] = [await freePort(), await freePort()];
        ports.push(port);
        const p = track(new ManagedProcess(`redis-tls-cluster-${i}`, 'redis-server', [
          ...tlsArgs(certs, port), '--dir', dir, '--dbfilename', `dump-${port}.rdb`,
          '--cluster-enabled', 'yes', '--cluster-port', `${bus}`, '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-node-timeout', '2000', '--tls-cluster', 'yes',
        ], {}));
        procs.push(p);
        p.start();
      }
      await Promise.all(procs.map((p) => p.waitForOutput('Ready to accept connections', 15_000)));
      // redis-cli only sets the cluster up here (its own TLS checks are not what is tested): --insecure skips them.
      const cli = ['--tls', '--insecure', '--cert', certs.clientCert, '--key', certs.clientKey];
      await runCli([...cli, '--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes']);
      const deadline = Date.now() + 20_000;
      for (let round = 0; round < 200; round++) {
        const infos = await Promise.all(ports.map((p) => runCli([...cli, '-p', `${p}`, 'cluster', 'info']).catch(() => '')));
        if (infos.every((i) => i.includes('cluster_state:ok'))) return r();
        if (Date.now() > deadline) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      throw new Error('the TLS cluster did not reach cluster_state:ok within 20 s');
    } catch (err) {
      await r().stop();
      throw err;
    }
  }

  logs(): string {
    return this.procs.map((p) => p.logs).join('\n');
  }

  async stop(): Promise<void> {
    await Promise.all(this.procs.map((p) => (p.running ? p.stop('SIGTERM', 5000) : Promise.resolve(null))));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The PEM text of a file (for PrivatePostgres, which copies its certificate into its own directory). */
export const pem = (file: string): string => readFileSync(file, 'utf8');
