// The webhooks bench's reconnect storm: every station of the fleet connects and boots at once
// while the 100-ID list is measured, as in the stations group (bench/stations.ts), here to compare
// the storm without and with active subscriptions (each claim and release appends its event).
import { setTimeout as sleep } from 'node:timers/promises';
import type { openBenchDatabase } from './database.js';
import type { LoadResult } from './load.js';
import { stopChild } from './processes.js';
import { insertStations, startStations } from './station-fleet.js';

export interface Fleet {
  stations: Array<[string, string]>;
  dir: string;
}

export interface StormFigures {
  label: string;
  accepted: number;
  allDoneMs: number;
  p50Ms: number;
  p99Ms: number;
  failures: Record<string, number>;
  list: LoadResult;
}

export async function startStationFleet(database: Awaited<ReturnType<typeof openBenchDatabase>>, count: number, dir: string): Promise<Fleet> {
  return { stations: await insertStations(database, 'CP-webhooks', count, 'generated'), dir };
}

export async function stormPair(fleet: Fleet, port: number, label: string, list: () => Promise<LoadResult>, log: (line: string) => void): Promise<StormFigures> {
  const run = startStations(`storm-${label.replace(/\W+/g, '-')}`, port, fleet.stations, 'storm', 300, fleet.dir);
  const during = list();
  const ready = (await run.ready) as Omit<StormFigures, 'label' | 'list'>;
  const listed = await during;
  log(
    `  storm of ${fleet.stations.length}, ${label}: ${ready.accepted} Accepted, all within ${(ready.allDoneMs / 1000).toFixed(1)} s, per station p50 ${ready.p50Ms.toFixed(0)} ms p99 ${ready.p99Ms.toFixed(0)} ms, failures ${JSON.stringify(ready.failures)}; list p99 ${listed.p99.toFixed(1)} ms`,
  );
  await stopChild(run.child);
  // The service sees every socket close and releases them before the next storm.
  await sleep(5000);
  return { label, accepted: ready.accepted, allDoneMs: ready.allDoneMs, p50Ms: ready.p50Ms, p99Ms: ready.p99Ms, failures: ready.failures, list: listed };
}
