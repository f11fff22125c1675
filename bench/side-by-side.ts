// Servers measured side by side on the same list requests: rounds whose order rotates (so that no
// server always meets the machine another left behind), and per window the throughput, p99 and
// the CPU each request cost in the server's own process and in the PostgreSQL backends serving it.
// The first contender (the service) is the reference: each round gives its ratio to every other.
// The floor (bench/floor.ts) and the peers (bench/peers.ts) are measured with it; bench/README.md
// describes the method.
import pg from 'pg';
import { runLoad, type LoadResult, type RequestShape } from './load.js';
import { cpuMs } from './processes.js';
import { fmt, median } from './report.js';

export interface Contender {
  name: string;
  port: number;
  pid: number;
  // The application_name its pool's connections carry: how its PostgreSQL backends are found.
  applicationName: string;
  next: () => RequestShape;
}

export interface SideBySideWindow extends LoadResult {
  cpuMsPerRequest: number | null;
  pgCpuMsPerRequest: number | null;
}

export interface SideBySideRound {
  order: string[];
  windows: Record<string, SideBySideWindow>;
  // the reference's requests per second over each other contender's, this round
  ratios: Record<string, number>;
}

export interface ContenderMedians {
  rps: number;
  p99: number;
  cpuMsPerRequest: number;
  pgCpuMsPerRequest: number;
  // median of the per-round ratios of the reference to this contender (1 for the reference)
  ratio: number;
}

export interface SideBySide {
  rows: number;
  connections: number;
  contenders: string[];
  rounds: SideBySideRound[];
  medians: Record<string, ContenderMedians>;
}

// CPU time so far of the current database's backends serving one server, by pid. Read from
// /proc/<pid>/stat (user + system), so only backends alive when it is read count; cpuSpent takes
// the difference per pid, a backend that appeared during the window counting whole.
async function backendCpu(admin: pg.Client, applicationName: string): Promise<Map<number, number>> {
  const { rows } = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [applicationName]);
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    const ms = cpuMs(pid);
    if (ms !== null) out.set(pid, ms);
  }
  return out;
}

function cpuSpent(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

async function window(admin: pg.Client, c: Contender, connections: number, durationSeconds: number): Promise<SideBySideWindow> {
  const pgBefore = await backendCpu(admin, c.applicationName);
  const cpuBefore = cpuMs(c.pid);
  const result = await runLoad({ port: c.port, connections, durationSeconds, next: c.next });
  const cpuAfter = cpuMs(c.pid);
  const pgAfter = await backendCpu(admin, c.applicationName);
  const perRequest = (ms: number) => (result.requests > 0 ? ms / result.requests : null);
  return {
    ...result,
    cpuMsPerRequest: cpuBefore !== null && cpuAfter !== null ? perRequest(cpuAfter - cpuBefore) : null,
    pgCpuMsPerRequest: perRequest(cpuSpent(pgBefore, pgAfter)),
  };
}

export function windowLine(name: string, w: SideBySideWindow): string {
  return `${name.padEnd(12)} ${fmt.int(w.rps).padStart(6)} rps p99 ${fmt.ms(w.p99).padStart(5)} ms errors ${w.non2xx + w.socketErrors} cpu ${fmt.cpu(w.cpuMsPerRequest)} + pg ${fmt.cpu(w.pgCpuMsPerRequest)} ms/req`;
}

export interface SideBySideOptions {
  // a database URL of the bench database, to find the backends in pg_stat_activity
  databaseUrl: string;
  rows: number;
  connections: number;
  rounds: number;
  durationSeconds: number;
  warmupSeconds: number;
  // the reference first
  contenders: Contender[];
  log: (line: string) => void;
}

export async function compareSideBySide(o: SideBySideOptions): Promise<SideBySide> {
  const [reference] = o.contenders;
  if (!reference || o.contenders.length < 2) throw new Error('a side-by-side comparison needs the reference and at least one other server');
  const admin = new pg.Client({ connectionString: o.databaseUrl, application_name: 'cns-bench-admin' });
  await admin.connect();
  try {
    for (const c of o.contenders) await runLoad({ port: c.port, connections: o.connections, durationSeconds: o.warmupSeconds, next: c.next });
    const rounds: SideBySideRound[] = [];
    for (let r = 0; r < o.rounds; r++) {
      // Rotated: round r starts with contender r (mod their number); with two, the reference goes
      // first in odd rounds and the other in even ones.
      const order = o.contenders.map((_, i) => o.contenders[(i + r) % o.contenders.length]!);
      const windows: Record<string, SideBySideWindow> = {};
      for (const c of order) windows[c.name] = await window(admin, c, o.connections, o.durationSeconds);
      const ratios: Record<string, number> = {};
      for (const c of o.contenders.slice(1)) ratios[c.name] = windows[reference.name]!.rps / windows[c.name]!.rps;
      rounds.push({ order: order.map((c) => c.name), windows, ratios });
      o.log(`  round ${r + 1}/${o.rounds} (${order[0]!.name} first):`);
      for (const c of o.contenders) o.log(`    ${windowLine(c.name, windows[c.name]!)}${c === reference ? '' : `  ${reference.name} / ${c.name} ${fmt.ratio(ratios[c.name]!)}`}`);
    }
    const medians: Record<string, ContenderMedians> = {};
    for (const c of o.contenders) {
      const med = (f: (w: SideBySideWindow) => number | null) => median(rounds.map((x) => f(x.windows[c.name]!) ?? NaN));
      medians[c.name] = {
        rps: med((w) => w.rps),
        p99: med((w) => w.p99),
        cpuMsPerRequest: med((w) => w.cpuMsPerRequest),
        pgCpuMsPerRequest: med((w) => w.pgCpuMsPerRequest),
        ratio: c === reference ? 1 : median(rounds.map((x) => x.ratios[c.name]!)),
      };
    }
    return { rows: o.rows, connections: o.connections, contenders: o.contenders.map((c) => c.name), rounds, medians };
  } finally {
    await admin.end();
  }
}

// The reference against one other contender: the median of the per-round ratios against a target,
// with both CPU figures beside it and the ratio CPU alone would give (the same cores for the
// server and PostgreSQL, nothing else running): steadier on a shared machine than requests per
// second, which follow whatever else runs.
export function ratioSummary(c: SideBySide, other: string, target: number, label: string): { ok: boolean; text: string } {
  const ref = c.contenders[0]!;
  const a = c.medians[ref]!;
  const b = c.medians[other]!;
  const total = (m: ContenderMedians) => m.cpuMsPerRequest + m.pgCpuMsPerRequest;
  return {
    ok: b.ratio >= target,
    text:
      `rows ${fmt.rows(c.rows)}, list 100 IDs, network-scoped token, ${c.connections} conns: ${ref} / ${label} ${fmt.ratio(b.ratio)} ` +
      `(median of ${c.rounds.length} rotated rounds: ${c.rounds.map((x) => fmt.ratio(x.ratios[other]!)).join(', ')}; need >= ${target.toFixed(2)}x); ` +
      `p99 ${fmt.ms(a.p99)} vs ${fmt.ms(b.p99)} ms; CPU ms/request, server + PostgreSQL backends: ${ref} ${fmt.cpu(a.cpuMsPerRequest)} + ${fmt.cpu(a.pgCpuMsPerRequest)} = ${fmt.cpu(total(a))}, ` +
      `${label} ${fmt.cpu(b.cpuMsPerRequest)} + ${fmt.cpu(b.pgCpuMsPerRequest)} = ${fmt.cpu(total(b))} (${label} / ${ref} CPU per request ${fmt.ratio(total(b) / total(a))})`,
  };
}
