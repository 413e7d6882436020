import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { FaultStack, ServiceName } from './fault-stack';

interface RedisClientInfo {
  id: string;
  name: string;
  port: number;
}

function parseClientList(text: string): RedisClientInfo[] {
  return text
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .map((line) => {
      const fields = new Map(line.trim().split(' ').map((kv) => {
        const i = kv.indexOf('=');
        return [kv.slice(0, i), kv.slice(i + 1)] as const;
      }));
      const addr = fields.get('addr') ?? '';
      return { id: fields.get('id') ?? '', name: fields.get('name') ?? '', port: Number(addr.slice(addr.lastIndexOf(':') + 1)) };
    });
}

/** Local TCP ports of the sockets a process holds open (Linux /proc). */
function localPortsOf(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      if (inodes.has(cols[9]!)) ports.add(parseInt(cols[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}

/**
 * The tenant-event bus connections (`${prefix}events-pub` / `events-sub`) of
 * one service. Every process names its bus connections alike, so the
 * service's own sockets are told apart by their local ports.
 */
export async function busClientsOf(stack: FaultStack, service: ServiceName): Promise<RedisClientInfo[]> {
  const pid = stack.services[service].pid;
  if (pid === undefined) return [];
  const ports = localPortsOf(pid);
  const list = parseClientList(String(await stack.redis.command('CLIENT', 'LIST')));
  return list.filter((c) => ports.has(c.port) && /events-(pub|sub)$/.test(c.name));
}

/** CLIENT KILL of every bus connection of `service`; returns how many were cut. */
export async function cutBus(stack: FaultStack, service: ServiceName): Promise<number> {
  let n = 0;
  for (const c of await busClientsOf(stack, service)) {
    n += Number(await stack.redis.command('CLIENT', 'KILL', 'ID', c.id));
  }
  return n;
}

/**
 * Keeps cutting `service`'s bus connections as they come back, until stop()
 * (bounded: at most `maxMs`). Returns how many connections were cut in all.
 */
export function holdBusCut(stack: FaultStack, service: ServiceName, maxMs = 10_000): { stop(): Promise<number> } {
  let stopped = false;
  let cuts = 0;
  const deadline = Date.now() + maxMs;
  const loop = (async () => {
    for (let i = 0; i < 2000 && !stopped && Date.now() < deadline; i++) {
      cuts += await cutBus(stack, service).catch(() => 0);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return cuts;
    },
  };
}
