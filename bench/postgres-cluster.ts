import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOOPBACK, freePort, runCommand } from './processes.js';

// The server configuration the published figures are measured with (`--own-postgres`). The
// 1,000,000-row table with its indexes is about 1.3 GB: with the stock 128 MB of shared_buffers
// every 100-ID list reads most of its rows through the kernel's page cache, and the comparison
// between sizes measures buffer replacement rather than the service. 3 GB holds the whole table.
export const BENCH_POSTGRES_SETTINGS: Readonly<Record<string, string>> = {
  shared_buffers: '3GB',
  effective_cache_size: '12GB',
  work_mem: '4MB',
  max_connections: '100',
  random_page_cost: '1.1',
  // Point lookups never reach JIT's cost threshold; off so that no plan pays the compile.
  jit: 'off',
  // Writes stay durable, as in production: the write scenarios measure committed transactions.
  synchronous_commit: 'on',
  // Seeding writes ~1.3 GB of WAL; no checkpoint should land in the middle of a measurement.
  max_wal_size: '8GB',
  checkpoint_timeout: '30min',
};

// Settings that can be set per database on a server the harness does not own (DATABASE_URL).
export const BENCH_DATABASE_SETTINGS: Readonly<Record<string, string>> = {
  random_page_cost: BENCH_POSTGRES_SETTINGS.random_page_cost!,
  jit: BENCH_POSTGRES_SETTINGS.jit!,
};

export function postgresBinDir(): string | null {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    if (existsSync(join(dir, 'initdb'))) return dir;
  } catch {
    // no pg_config on PATH; try Debian's layout
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0]!, 'bin') : null;
}

export interface OwnCluster {
  url: string;
  dataDir: string;
  stop(): Promise<void>;
}

// A throwaway PostgreSQL cluster configured with BENCH_POSTGRES_SETTINGS, from this machine's
// PostgreSQL binaries. initdb refuses to run as root, so as root it runs as the postgres user.
export async function startOwnCluster(): Promise<OwnCluster> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('--own-postgres needs PostgreSQL server binaries (initdb, pg_ctl): set PG_BIN or put pg_config on PATH');
  const dir = mkdtempSync(join(tmpdir(), 'cns-bench-pg-'));
  const dataDir = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  let wrap = (command: string, args: string[]): [string, string[]] => [command, args];
  if (asRoot) {
    const uid = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
    const gid = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
    chownSync(dir, Number(uid), Number(gid));
    wrap = (command, args) => ['runuser', ['-u', 'postgres', '--', command, ...args]];
  }
  const run = async (command: string, args: string[], timeoutMs: number) => {
    const [c, a] = wrap(command, args);
    const result = await runCommand(c, a, { cwd: dir, timeoutMs });
    if (result.code !== 0) throw new Error(`${command} failed (${result.code}):\n${result.stdout}\n${result.stderr}`);
  };
  const cleanupDir = () => rmSync(dir, { recursive: true, force: true });
  try {
    await run(join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync'], 120_000);
  } catch (error) {
    cleanupDir();
    throw error;
  }
  const port = await freePort();
  const options = [
    `-c port=${port}`,
    `-c listen_addresses=${LOOPBACK}`,
    `-c unix_socket_directories=${dir}`,
    ...Object.entries(BENCH_POSTGRES_SETTINGS).map(([k, v]) => `-c ${k}=${v}`),
  ].join(' ');
  const stop = async () => {
    const [c, a] = wrap(join(bin, 'pg_ctl'), ['-D', dataDir, '-m', 'fast', '-w', 'stop']);
    await runCommand(c, a, { cwd: dir, timeoutMs: 60_000 }).catch(() => undefined);
    cleanupDir();
  };
  try {
    await run(join(bin, 'pg_ctl'), ['-D', dataDir, '-w', '-t', '60', '-l', join(dir, 'server.log'), '-o', options, 'start'], 90_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `postgres://postgres@${LOOPBACK}:${port}/postgres`, dataDir, stop };
}
