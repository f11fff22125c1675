// The stations of the benchmark groups that connect real OCPP-J clients (bench/stations.ts,
// bench/webhook-storm.ts): assets with passwords written straight into the bench database, and the
// process that connects them (bench/station-load.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { hashAssetPassword, hashGeneratedPassword } from '../src/asset-management/password-hashing.js';
import { generatePassword } from '../src/asset-management/password-rules.js';
import type { openBenchDatabase } from './database.js';
import { ROOT_DIR } from './options.js';
import { LOOPBACK, startChild, stopChild } from './processes.js';

export async function insertStations(database: Awaited<ReturnType<typeof openBenchDatabase>>, prefix: string, count: number, kind: 'generated' | 'supplied') {
  const stations: Array<[string, string]> = [];
  const hashes: string[] = [];
  // One supplied password and one argon2id hash for all: verifying costs the same, hashing 2,000
  // of them would take minutes.
  const supplied = 'Bench:Supplied-Password-1';
  const suppliedHash = kind === 'supplied' ? await hashAssetPassword('2.0.1', supplied, { generated: false }) : '';
  for (let i = 0; i < count; i++) {
    const password = kind === 'supplied' ? supplied : generatePassword('2.0.1');
    stations.push([`${prefix}-${i}`, password]);
    hashes.push(kind === 'supplied' ? suppliedHash : hashGeneratedPassword(password));
  }
  for (let from = 0; from < count; from += 5000) {
    const ids = stations.slice(from, from + 5000).map(([id]) => id);
    await database.db.execute(sql`
      insert into assets (id, network, ocpp_version, security_profile, password_hash, password_changed_at)
      select id, 'net_bench_stations', '2.0.1', 1, hash, now()
        from unnest(${sql.param(ids)}::text[], ${sql.param(hashes.slice(from, from + 5000))}::text[]) as s(id, hash)`);
  }
  return stations;
}

export function startStations(name: string, port: number, stations: Array<[string, string]>, mode: 'held' | 'storm', heartbeatSeconds: number, dir: string) {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(stations));
  // The limit is raised for this process only, in the script (the hard limit allows it).
  const child = startChild(name, 'sh', ['-c', 'ulimit -n "$(ulimit -Hn)" && exec node --import tsx bench/station-load.ts'], {
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, STATIONS_FILE: file, ENDPOINT: `ws://${LOOPBACK}:${port}/ocpp`, MODE: mode, HEARTBEAT_SECONDS: String(heartbeatSeconds) },
    logFile: join(dir, `${name}.log`),
  });
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    let buffer = '';
    child.process.stdout!.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      for (const line of buffer.split('\n').slice(0, -1)) {
        const event = JSON.parse(line) as Record<string, unknown>;
        if (event.event === 'ready') resolve(event);
      }
      buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
    });
    void child.exited.then((code) => reject(new Error(`${name} exited with ${code}`)));
  });
  return { child, ready };
}


export interface StormFigures {
  accepted: number;
  // From the first connection to the last station's answer to its BootNotification.
  allDoneMs: number;
  p50Ms: number;
  p99Ms: number;
  failures: Record<string, number>;
}

// A reconnect storm: every station connects and boots at once, while `beside` runs (given the
// promise of the last station's answer: the list runs until then, at full load the whole storm).
// The stations are disconnected again, and the service has released them, when it resolves.
export async function runStorm<T>(name: string, port: number, stations: Array<[string, string]>, dir: string, beside: (until: Promise<unknown>) => Promise<T>): Promise<StormFigures & { beside: T }> {
  const run = startStations(name, port, stations, 'storm', 300, dir);
  const during = beside(run.ready);
  const ready = (await run.ready) as unknown as StormFigures;
  const besideResult = await during;
  await stopChild(run.child);
  await sleep(5000);
  return { accepted: ready.accepted, allDoneMs: ready.allDoneMs, p50Ms: ready.p50Ms, p99Ms: ready.p99Ms, failures: ready.failures, beside: besideResult };
}
