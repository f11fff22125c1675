// The webhooks bench's reconnect storm: every station of the fleet connects and boots at once
// while the 100-ID list is measured, as in the stations group (bench/stations.ts), here to compare
// the storm without and with active subscriptions (each claim and release appends its event).
import type { openBenchDatabase } from './database.js';
import type { LoadResult } from './load.js';
import { insertStations, runStorm, type StormFigures as Storm } from './station-fleet.js';

export interface Fleet {
  stations: Array<[string, string]>;
  dir: string;
}

export type StormFigures = Storm & { label: string; list: LoadResult };

export async function startStationFleet(database: Awaited<ReturnType<typeof openBenchDatabase>>, count: number, dir: string): Promise<Fleet> {
  return { stations: await insertStations(database, 'CP-webhooks', count, 'generated'), dir };
}

export async function stormPair(fleet: Fleet, port: number, label: string, list: (until: Promise<unknown>) => Promise<LoadResult>, log: (line: string) => void): Promise<StormFigures> {
  const { beside, ...storm } = await runStorm(`storm-${label.replace(/\W+/g, '-')}`, port, fleet.stations, fleet.dir, list);
  log(
    `  storm of ${fleet.stations.length}, ${label}: ${storm.accepted} Accepted, all within ${(storm.allDoneMs / 1000).toFixed(1)} s, per station p50 ${storm.p50Ms.toFixed(0)} ms p99 ${storm.p99Ms.toFixed(0)} ms, failures ${JSON.stringify(storm.failures)}; list p99 ${beside.p99.toFixed(1)} ms`,
  );
  return { label, ...storm, list: beside };
}
