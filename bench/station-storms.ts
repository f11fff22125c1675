// The reconnect storms of the stations group (bench/stations.ts; alone with `--storms-only`):
// every station connects and boots at once, first with nothing else running (what a login costs
// the service), then with the 100-ID list at full load until the last station is Accepted, against
// the list alone in the window just before. Figures, never pass/fail tests.
import type { LoadResult } from './load.js';
import { cpuMs } from './processes.js';
import { runStorm, type StormFigures } from './station-fleet.js';

export interface StormRounds {
  port: number;
  servicePid: number;
  storms: Array<[name: string, stations: Array<[string, string]>]>;
  rounds: number;
  listSeconds: number;
  list(seconds: number, until?: Promise<unknown>): Promise<LoadResult>;
  dir: string;
  log(line: string): void;
  row(name: string, result: LoadResult): void;
}

export interface StormRound {
  // Without the list: the storm's own time, and the service's CPU per login (from the first
  // connection to the last answer, the releases after it not counted).
  quiet: StormFigures & { serviceCpuMsPerLogin: number };
  alone: LoadResult;
  withList: StormFigures & { list: LoadResult; listP99Ratio: number };
}

export async function runStormRounds(o: StormRounds): Promise<Record<string, StormRound[]>> {
  const figures: Record<string, StormRound[]> = {};
  for (let round = 1; round <= o.rounds; round++) {
    for (const [name, stations] of o.storms) {
      if (stations.length === 0) continue;
      const { beside: cpu, ...quiet } = await runStorm(`${name}-${round}-quiet`, o.port, stations, o.dir, async (until) => {
        const before = cpuMs(o.servicePid) ?? 0;
        await until.catch(() => undefined);
        return (cpuMs(o.servicePid) ?? 0) - before;
      });
      const serviceCpuMsPerLogin = cpu / Math.max(1, quiet.accepted);
      o.log(`  ${name} (round ${round}), nothing else running: ${quiet.accepted}/${stations.length} Accepted within ${(quiet.allDoneMs / 1000).toFixed(1)} s, per station p50 ${quiet.p50Ms.toFixed(0)} ms p99 ${quiet.p99Ms.toFixed(0)} ms; service CPU ${serviceCpuMsPerLogin.toFixed(2)} ms per login`);
      const alone = await o.list(o.listSeconds);
      const { beside: list, ...withList } = await runStorm(`${name}-${round}`, o.port, stations, o.dir, (until) => o.list(o.listSeconds, until));
      const ratio = list.p99 / alone.p99;
      o.row(`list, 100 IDs, alone (before ${name}, round ${round})`, alone);
      o.row(`list during ${name} of ${stations.length} (round ${round})`, list);
      o.log(
        `  ${name} (round ${round}) with the list at full load: ${withList.accepted}/${stations.length} Accepted, all within ${(withList.allDoneMs / 1000).toFixed(1)} s (target <= 10 s for 2,000 generated), per station p50 ${withList.p50Ms.toFixed(0)} ms p99 ${withList.p99Ms.toFixed(0)} ms, failures ${JSON.stringify(withList.failures)}; list p99 ${ratio.toFixed(2)}x alone (target <= 3x)`,
      );
      (figures[name] ??= []).push({ quiet: { ...quiet, serviceCpuMsPerLogin }, alone, withList: { ...withList, list, listP99Ratio: ratio } });
    }
  }
  return figures;
}
