import { cpus, loadavg, totalmem } from 'node:os';
import type { Machine } from './result-schema';

export function machineInfo(mode: Machine['mode'], redis: string): Machine {
  const list = cpus();
  return {
    cores: list.length,
    cpu_model: list[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    total_mem_mib: Math.round(totalmem() / 2 ** 20),
    load_avg_at_start: loadavg().map((l) => Math.round(l * 100) / 100),
    mode,
    started_at: new Date().toISOString(),
    duration_s: 0,
    redis,
  };
}
