// What a server process holds in memory when it starts: on PGlite with an empty DATA_DIR (the
// first start, which a container's memory limit must admit), on PGlite again with that folder,
// and on PostgreSQL for comparison; then a first start under the memory limit a small container
// has, enforced by the kernel. Figures only, no targets: they go in docs/performance.md.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createBenchTarget } from './database.js';
import { createMemoryCgroup } from './memory-cgroup.js';
import { ROOT_DIR } from './options.js';
import { freePort, LOOPBACK, rssMiB, SERVER_ARGS, SERVER_NODE, startChild, stopChild, waitForHttp } from './processes.js';
import { fmt } from './report.js';

// How long the server is left idle after it answers /readyz before its RSS is read.
const SETTLE_MS = 5_000;
// The container limit a first start on the embedded database must fit (docs/performance.md, "Memory at start").
export const FIRST_START_LIMIT_MIB = 512;

export interface StartMemory {
  database: 'pglite' | 'postgres';
  start: 'first' | 'later';
  label: string;
  // VmHWM when the settled RSS is read: the highest RSS of the process's life so far.
  peakMiB: number | null;
  // VmRSS SETTLE_MS after /readyz first answered 200, without load.
  steadyMiB: number | null;
  readySeconds: number;
}

export interface LimitedStart {
  limitMiB: number;
  // How the limit was enforced, or why it could not be.
  cgroup: string;
  ready: boolean | null;
  // The cgroup's highest usage (the process and the page cache it caused).
  peakMiB: number | null;
  oomKills: number | null;
}

function serverEnv(port: number, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', LOG_LEVEL: 'warn', HOST: LOOPBACK, PORT: String(port), ...env };
}

async function measureStart(label: string, database: StartMemory['database'], start: StartMemory['start'], env: NodeJS.ProcessEnv, logDir: string): Promise<StartMemory> {
  const port = await freePort();
  const t0 = performance.now();
  const child = startChild(`server (${label})`, SERVER_NODE, SERVER_ARGS, {
    cwd: ROOT_DIR,
    env: serverEnv(port, env),
    logFile: join(logDir, `memory-${database}-${start}.log`),
  });
  try {
    await waitForHttp(child, `http://${LOOPBACK}:${port}/readyz`, 120_000, 200);
    const readySeconds = (performance.now() - t0) / 1000;
    await sleep(SETTLE_MS);
    return { database, start, label, peakMiB: rssMiB(child.pid, 'VmHWM'), steadyMiB: rssMiB(child.pid), readySeconds };
  } finally {
    await stopChild(child);
  }
}

// A first start on an empty PGlite folder inside a memory cgroup limited to limitMiB.
async function measureLimitedFirstStart(limitMiB: number, logDir: string): Promise<LimitedStart> {
  const cgroup = createMemoryCgroup(limitMiB);
  if (typeof cgroup === 'string') return { limitMiB, cgroup, ready: null, peakMiB: null, oomKills: null };
  const pglite = await createBenchTarget(undefined);
  try {
    const port = await freePort();
    const { command, args } = cgroup.wrap(SERVER_NODE, SERVER_ARGS);
    const child = startChild('server (memory limit)', command, args, { cwd: ROOT_DIR, env: serverEnv(port, { DATA_DIR: pglite.dataDir }), logFile: join(logDir, 'memory-limited.log') });
    let ready = true;
    try {
      await waitForHttp(child, `http://${LOOPBACK}:${port}/readyz`, 120_000, 200);
      await sleep(SETTLE_MS);
    } catch {
      // killed (or failed) before it was ready: the OOM count says which
      ready = false;
    } finally {
      await stopChild(child);
    }
    return { limitMiB, cgroup: cgroup.description, ready, peakMiB: cgroup.peakMiB(), oomKills: cgroup.oomKills() };
  } finally {
    await cgroup.remove();
    await pglite.drop();
  }
}

// Each database is a throwaway one: an empty PGlite folder, an empty PostgreSQL database (when a
// URL is given), both removed at the end.
export async function measureStartMemory(
  databaseUrl: string | undefined,
  logDir: string,
  log: (line: string) => void,
): Promise<{ starts: StartMemory[]; limited: LimitedStart }> {
  const results: StartMemory[] = [];
  const run = async (label: string, database: StartMemory['database'], start: StartMemory['start'], env: NodeJS.ProcessEnv) => {
    const m = await measureStart(label, database, start, env, logDir);
    results.push(m);
    log(`  ${label.padEnd(42)} peak ${fmt.mib(m.peakMiB).padStart(4)} MiB  steady ${fmt.mib(m.steadyMiB).padStart(4)} MiB  (ready after ${m.readySeconds.toFixed(1)} s)`);
  };
  const pglite = await createBenchTarget(undefined);
  try {
    await run('PGlite, first start (empty DATA_DIR)', 'pglite', 'first', { DATA_DIR: pglite.dataDir });
    await run('PGlite, later start', 'pglite', 'later', { DATA_DIR: pglite.dataDir });
  } finally {
    await pglite.drop();
  }
  if (databaseUrl) {
    const postgres = await createBenchTarget(databaseUrl);
    try {
      await run('PostgreSQL, first start (empty database)', 'postgres', 'first', { DATABASE_URL: postgres.url });
      await run('PostgreSQL, later start', 'postgres', 'later', { DATABASE_URL: postgres.url });
    } finally {
      await postgres.drop();
    }
  } else {
    log('  PostgreSQL: not measured (no DATABASE_URL, no --own-postgres)');
  }
  const limited = await measureLimitedFirstStart(FIRST_START_LIMIT_MIB, logDir);
  const outcome = limited.ready === null ? `not measured: ${limited.cgroup}` : limited.ready ? 'ready' : `NOT READY (OOM kills: ${limited.oomKills})`;
  log(`  ${`PGlite, first start under ${limited.limitMiB} MiB`.padEnd(42)} ${outcome}${limited.peakMiB !== null ? `, the cgroup's peak usage ${fmt.mib(limited.peakMiB)} MiB` : ''}`);
  if (limited.ready !== null) log(`    (${limited.cgroup})`);
  return { starts: results, limited };
}

