import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pgbenchScript } from './list-sql.js';
import { postgresBinDir } from './postgres-cluster.js';
import { runCommand } from './processes.js';
import { percentile, type LoadResult } from './load.js';

export const PGBENCH = process.env.PGBENCH ?? join(postgresBinDir() ?? '/usr/lib/postgresql/15/bin', 'pgbench');

export function pgbenchAvailable(): boolean {
  return existsSync(PGBENCH);
}

export interface PgbenchRun {
  url: string;
  clients: number;
  durationSeconds: number;
  size: number;
  ids: number;
  existing: number;
}

// pgbench -M prepared on the service's list SQL: the database's own ceiling for the list.
export async function runPgbench(run: PgbenchRun, cwd: string): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'cns-bench-pgbench-'));
  try {
    const script = join(dir, 'list.sql');
    writeFileSync(script, pgbenchScript({ ids: run.ids, existing: run.existing }));
    const url = new URL(run.url);
    const threads = Math.min(run.clients, 2);
    const args = [
      '-n', // no pgbench tables to vacuum
      '-M', 'prepared',
      '-c', String(run.clients),
      '-j', String(threads),
      '-T', String(run.durationSeconds),
      '-D', `size=${run.size}`,
      '-f', script,
      '-l', `--log-prefix=${join(dir, 'pgb')}`,
      '-h', url.hostname,
      '-p', url.port || '5432',
      '-U', decodeURIComponent(url.username || 'postgres'),
      decodeURIComponent(url.pathname.slice(1)),
    ];
    const env = { ...process.env, PGAPPNAME: 'cns-bench-pgbench', ...(url.password ? { PGPASSWORD: decodeURIComponent(url.password) } : {}) };
    const started = Date.now();
    const { code, stdout, stderr } = await runCommand(PGBENCH, args, { cwd, env, timeoutMs: (run.durationSeconds + 60) * 1000 });
    if (code !== 0) throw new Error(`pgbench exited with ${code}:\n${stderr}\n${stdout}`);
    const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1] ?? NaN);
    const failed = Number(/number of failed transactions: (\d+)/.exec(stdout)?.[1] ?? 0);
    const latencies: number[] = [];
    for (const file of readdirSync(dir).filter((f) => f.startsWith('pgb.'))) {
      for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
        const fields = line.split(' ');
        if (fields.length >= 6) latencies.push(Number(fields[2]) / 1000);
      }
    }
    latencies.sort((a, b) => a - b);
    return {
      rps: tps,
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      requests: latencies.length,
      non2xx: failed,
      socketErrors: 0,
      durationSeconds: (Date.now() - started) / 1000,
      statusCodes: {},
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
