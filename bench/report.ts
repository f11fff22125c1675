import type { LoadResult } from './load.js';

export type Target = 'service' | 'naive' | 'pgbench';

export interface ScenarioInfo {
  // stable identity across runs, e.g. "list ids=100 c=32 token=all rows=10000 service"
  key: string;
  label: string;
  group: 'list' | 'write' | 'token' | 'mixed';
  target: Target;
  rows: number;
  connections: number;
  ids?: number;
  token?: 'all' | 'network';
}

export interface Measurement extends LoadResult {
  // RSS of the process under load right after the scenario (service or naive server), MiB
  rssMiB: number | null;
  // CPU time per completed request of that process, and of all PostgreSQL processes (cluster-wide)
  cpuMsPerRequest: number | null;
  pgCpuMsPerRequest: number | null;
  // CPU time per request of the harness itself (autocannon and the latency bookkeeping): the load
  // generator shares the machine's cores with the servers, so it is part of every request's cost.
  loadCpuMsPerRequest: number | null;
}

export interface ScenarioRecord extends ScenarioInfo {
  runs: Measurement[];
  median: Measurement;
}

export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

// Medians taken metric by metric; error counts are summed, so one failing run is never hidden.
export function medianOf(runs: Measurement[]): Measurement {
  const m = (f: (r: Measurement) => number | null) => median(runs.map((r) => f(r) ?? NaN));
  const statusCodes: Record<string, number> = {};
  for (const r of runs) for (const [code, n] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + n;
  const rss = m((r) => r.rssMiB);
  const cpu = m((r) => r.cpuMsPerRequest);
  const pgCpu = m((r) => r.pgCpuMsPerRequest);
  const loadCpu = m((r) => r.loadCpuMsPerRequest);
  // the slowest of all runs, not a median: a limit on the slowest answer must see every run
  const maxOf = (f: (r: Measurement) => number | undefined) => {
    const values = runs.map(f).filter((v): v is number => v !== undefined && Number.isFinite(v));
    return values.length > 0 ? { value: Math.max(...values) } : null;
  };
  const max = maxOf((r) => r.max);
  const firstRoundMax = maxOf((r) => r.firstRoundMax);
  return {
    ...(max ? { max: max.value } : {}),
    ...(firstRoundMax ? { firstRoundMax: firstRoundMax.value } : {}),
    rps: m((r) => r.rps),
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    requests: m((r) => r.requests),
    non2xx: runs.reduce((s, r) => s + r.non2xx, 0),
    socketErrors: runs.reduce((s, r) => s + r.socketErrors, 0),
    durationSeconds: m((r) => r.durationSeconds),
    statusCodes,
    rssMiB: Number.isFinite(rss) ? rss : null,
    cpuMsPerRequest: Number.isFinite(cpu) ? cpu : null,
    pgCpuMsPerRequest: Number.isFinite(pgCpu) ? pgCpu : null,
    loadCpuMsPerRequest: Number.isFinite(loadCpu) ? loadCpu : null,
  };
}

export const fmt = {
  int: (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a'),
  ms: (n: number) => (!Number.isFinite(n) ? 'n/a' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : Math.round(n).toString()),
  ratio: (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)}x` : ''),
  mib: (n: number | null) => (n === null || !Number.isFinite(n) ? '' : n.toFixed(0)),
  cpu: (n: number | null) => (n === null || !Number.isFinite(n) ? '' : n < 1 ? n.toFixed(3) : n.toFixed(2)),
  rows: (n: number) => (n >= 1_000_000 ? `${n / 1_000_000}M` : n >= 1000 ? `${n / 1000}k` : String(n)),
};

export function renderTable(header: string[], rows: string[][], rightAligned: boolean[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (rightAligned[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
