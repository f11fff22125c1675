// The "stations" group of `npm run bench` (`npm run bench -- --stations`): held connections,
// password rotations, reconnect storms (bench/station-storms.ts; alone with `--storms-only`) and
// abusive stations (bench/abuse.ts; alone with `--abuse`) against the compiled server, with the
// 100-ID payment list measured beside them.
// Figures, never pass/fail tests: the targets are printed next to them.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createBenchClients, createBenchTarget, NETWORK_COUNT, openBenchDatabase, seedPayments } from './database.js';
import { runAbuseGroup } from './abuse.js';
import type { LoadResult } from './load.js';
import { BENCH_DIR, ROOT_DIR } from './options.js';
import { median } from './report.js';
import { cpuMs, freePort, LOOPBACK, postgresCpuMs, rssMiB, runCommand, SERVER_NODE, stopAllChildren, stopChild, type Child } from './processes.js';
import { insertStations, startStations } from './station-fleet.js';
import { rotationRoundTrips, type RotationFigures } from './station-rotations.js';
import { runStormRounds } from './station-storms.js';
import { startBenchService } from './bench-service.js';
import { listBeside } from './payment-requests.js';

interface StationsOptions {
  held: number;
  storm: number;
  stormSupplied: number;
  durationSeconds: number;
  // Alone/held pairs of list windows, alternated (the held ratio is their median), and their length.
  rounds: number;
  heldDurationSeconds: number;
  heartbeatSeconds: number;
  rotations: number;
  // Only the abuse group (`--abuse`), and the length of each of its windows.
  abuseOnly: boolean;
  // Only the storms (`--storms-only`), each `stormRounds` times.
  stormsOnly: boolean;
  stormRounds: number;
  abuseWindowSeconds: number;
  build: boolean;
  out: string;
}

function parse(argv: string[]): StationsOptions {
  const quick = argv.includes('--quick');
  const abuseOnly = argv.includes('--abuse');
  const stormsOnly = argv.includes('--storms-only');
  const value = (name: string, fallback: number) => {
    const i = argv.indexOf(name);
    return i >= 0 ? Number(argv[i + 1]) : fallback;
  };
  return {
    held: value('--held', abuseOnly || stormsOnly ? 0 : quick ? 1000 : 10_000),
    storm: value('--storm', abuseOnly ? 0 : quick ? 200 : 2000),
    stormSupplied: value('--storm-supplied', abuseOnly ? 0 : quick ? 50 : 2000),
    durationSeconds: value('--duration', quick ? 5 : 10),
    // An 8 s window's p99 swung from 1.0x to 2.3x between rounds of one run; five rounds of 15 s
    // gave medians of 1.43x and 1.44x on two Nodes (2026-11-25).
    rounds: value('--rounds', quick ? 1 : 5),
    heldDurationSeconds: value('--held-duration', quick ? 5 : 15),
    heartbeatSeconds: value('--heartbeat', 5),
    rotations: value('--rotations', quick ? 200 : 1000),
    abuseOnly,
    stormsOnly,
    stormRounds: value('--storm-rounds', 1),
    abuseWindowSeconds: value('--abuse-duration', quick ? 5 : 15),
    build: !argv.includes('--no-build'),
    out: join(BENCH_DIR, 'results', `stations${abuseOnly ? '-abuse' : stormsOnly ? '-storms' : ''}-${quick ? 'quick' : 'latest'}.json`),
  };
}

const log = (line: string) => process.stdout.write(`${line}\n`);

// Cores each process used while `work` ran: on a 2-core machine the stations' own process and
// PostgreSQL take CPU from the service, and the ratios below cannot be read without them.
interface Cores {
  service: number;
  stations: number | null;
  postgres: number | null;
  bench: number;
}

// PostgreSQL's cores are counted only when the service runs on it (not on the embedded database).
async function withCores<T>(servicePid: number, stationsPid: number | undefined, postgres: boolean, work: () => Promise<T>): Promise<[T, Cores]> {
  const postgresMs = () => (postgres ? postgresCpuMs() : 0);
  const before = { service: cpuMs(servicePid) ?? 0, stations: stationsPid ? (cpuMs(stationsPid) ?? 0) : 0, postgres: postgresMs(), bench: process.cpuUsage() };
  const started = performance.now();
  const result = await work();
  const ms = performance.now() - started;
  const bench = process.cpuUsage(before.bench);
  return [
    result,
    {
      service: ((cpuMs(servicePid) ?? 0) - before.service) / ms,
      stations: stationsPid ? ((cpuMs(stationsPid) ?? 0) - before.stations) / ms : null,
      postgres: postgres ? (postgresMs() - before.postgres) / ms : null,
      bench: (bench.user + bench.system) / 1000 / ms,
    },
  ];
}

const coresText = (c: Cores) =>
  `cores: service ${c.service.toFixed(2)}, stations ${c.stations === null ? '-' : c.stations.toFixed(2)}, PostgreSQL ${c.postgres === null ? '-' : c.postgres.toFixed(2)}, list client ${c.bench.toFixed(2)}`;

async function main(): Promise<void> {
  const options = parse(process.argv.slice(2));
  const serverNodeVersion = (await runCommand(SERVER_NODE, ['--version'], { cwd: ROOT_DIR, timeoutMs: 10_000 })).stdout.trim();
  log(`stations benchmark, ${new Date().toISOString()}, service on Node ${serverNodeVersion}: ${options.held} held, storms of ${options.storm} (HMAC) and ${options.stormSupplied} (argon2id), ${os.availableParallelism()} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  if (options.build) {
    const build = await runCommand('npm', ['run', 'build'], { cwd: ROOT_DIR, timeoutMs: 300_000 });
    if (build.code !== 0) throw new Error(`npm run build failed:\n${build.stdout}\n${build.stderr}`);
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'cns-bench-stations-'));
  const target = await createBenchTarget(process.env.DATABASE_URL);
  const results: Record<string, unknown> = { startedAt: new Date().toISOString(), options, database: target.kind, serverNode: serverNodeVersion };
  let server: Child | undefined;
  try {
    const database = await openBenchDatabase(target);
    const clients = await createBenchClients(database);
    await seedPayments(database, 0, 10_000, () => undefined);
    const held = await insertStations(database, 'CP-held', options.held, 'generated');
    const storm = await insertStations(database, 'CP-storm', options.storm, 'generated');
    const stormSupplied = await insertStations(database, 'CP-supplied', options.stormSupplied, 'supplied');
    const rotating = await insertStations(database, 'CP-rotate', 2, 'generated');
    // The abuse group's: the flooding and the non-reading station, the other station whose logins
    // are timed (generated and supplied password), the asset the wrong passwords are tried on.
    const abusers = await insertStations(database, 'CP-abuse', 3, 'generated');
    const abused = await insertStations(database, 'CP-abuse-supplied', 2, 'supplied');
    await database.close();

    // Every service process of the group starts alike; a second one (PostgreSQL) shares the database.
    const startService = (name: string, port: number) => startBenchService(name, port, target, dir);
    const port = await freePort();
    server = await startService('service', port);
    const token = await fetch(`http://${LOOPBACK}:${port}/oauth/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${clients.all.clientId}:${clients.all.clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials',
    }).then(async (r) => `Bearer ${((await r.json()) as { access_token: string }).access_token}`);
    const list = (seconds: number, until?: Promise<unknown>): Promise<LoadResult> => listBeside(port, token, seconds, until);
    const row = (name: string, r: LoadResult) => log(`  ${name.padEnd(44)} ${r.rps.toFixed(0).padStart(6)} rps  p50 ${r.p50.toFixed(1)} ms  p99 ${r.p99.toFixed(1)} ms  non-2xx ${r.non2xx}  errors ${r.socketErrors}`);

    const abuse = () =>
      runAbuseGroup({
        port,
        restartService: async () => {
          await stopChild(server!);
          server = await startService('service', port);
          return server.pid;
        },
        token,
        windowSeconds: options.abuseWindowSeconds,
        maxFloodCalls: options.abuseWindowSeconds * 10_000,
        maxNonReaderMiB: options.abuseWindowSeconds * 16,
        flood: abusers[0]!,
        nonReader: abusers[1]!,
        wrongPasswordTarget: abused[0]!,
        probes: { hmac: abusers[2]!, argon2id: abused[1]! },
        dir,
        log,
      });
    // Reconnect storms (bench/station-storms.ts), after the held stations or alone.
    const storms = () =>
      runStormRounds({
        port,
        servicePid: server!.pid,
        storms: [
          ['storm-hmac', storm],
          ['storm-supplied', stormSupplied],
        ],
        rounds: options.stormRounds,
        listSeconds: options.durationSeconds,
        list,
        dir,
        log,
        row,
      });
    // One part alone; the storms after a window of the list, so that their first meets a warm process.
    if (options.stormsOnly || options.abuseOnly) {
      if (options.stormsOnly) await list(5);
      results[options.stormsOnly ? 'storms' : 'abuse'] = await (options.stormsOnly ? storms() : abuse());
      writeFileSync(options.out, `${JSON.stringify(results, null, 2)}\n`);
      log(`figures written to ${options.out}`);
      return;
    }

    // Every station heartbeats at least twice before anything is measured.
    const settleSeconds = Math.max(10, options.heartbeatSeconds * 2);
    const cores = <T>(stationsPid: number | undefined, work: () => Promise<T>) => withCores(server!.pid, stationsPid, target.kind === 'postgres', work);

    // RSS before any load, so the list's own heap growth is not counted against the stations.
    await sleep(2000);
    const rssBefore = rssMiB(server.pid)!;
    // Warm-up: the stations held once, then the list. The first time a process holds 10,000
    // stations its heap is still growing to fit them, and a first round measured that rather than
    // a service that has held its stations for a while (1.95x in round 1 against 0.92x and 1.51x
    // in rounds 2 and 3 of one run, 2026-11-25). While they are held: RSS per station (the list
    // has not run yet), their cost with nothing else running, and password rotations.
    const warm = startStations('held-warm-up', port, held, 'held', options.heartbeatSeconds, dir);
    const warmReady = await warm.ready;
    log(`held (warm-up): ${JSON.stringify(warmReady)}`);
    await sleep(settleSeconds * 1000);
    const rssHeld = rssMiB(server.pid)!;
    const perConnectionKiB = ((rssHeld - rssBefore) * 1024) / (warmReady.accepted as number);
    const [, holdingCores] = await cores(warm.child.pid, () => sleep(options.heldDurationSeconds * 1000));
    log(`  ${warmReady.accepted} stations held, no list: ${coresText(holdingCores)}`);
    // Password rotations while the held stations stay connected: on one replica, and (PostgreSQL)
    // with the station on a second replica and the API call through the first.
    const base = `http://${LOOPBACK}:${port}`;
    const rotation: Record<string, RotationFigures> = {};
    rotation.oneReplica = await rotationRoundTrips(base, `ws://${LOOPBACK}:${port}/ocpp`, token, rotating[0]!, options.rotations);
    log(`  rotation round trip, one replica, ${warmReady.accepted} stations held: p50 ${rotation.oneReplica.p50Ms.toFixed(1)} ms  p99 ${rotation.oneReplica.p99Ms.toFixed(1)} ms (target p50 <= 20 ms)`);
    if (target.kind === 'postgres') {
      const secondPort = await freePort();
      const second = await startService('service-b', secondPort);
      rotation.twoReplicas = await rotationRoundTrips(base, `ws://${LOOPBACK}:${secondPort}/ocpp`, token, rotating[1]!, options.rotations);
      log(`  rotation round trip, station on the other replica: p50 ${rotation.twoReplicas.p50Ms.toFixed(1)} ms  p99 ${rotation.twoReplicas.p99Ms.toFixed(1)} ms (target p50 <= 50 ms)`);
      await stopChild(second);
    }
    results.rotation = rotation;
    await list(settleSeconds);
    await stopChild(warm.child);
    await sleep(5000);

    // The list alone, then with the stations held, `rounds` times over: the same list measured
    // before and after the stations once differed by up to 30 %, so a single pair measured the
    // machine's drift as much as the stations. Each round connects all the stations anew.
    const pairs: Array<{ ready: Record<string, unknown>; alone: LoadResult; held: LoadResult; ratio: number; aloneCores: Cores; heldCores: Cores }> = [];
    for (let round = 1; round <= options.rounds; round++) {
      const [alone, aloneCores] = await cores(undefined, () => list(options.heldDurationSeconds));
      const heldRun = startStations(`held-${round}`, port, held, 'held', options.heartbeatSeconds, dir);
      const ready = await heldRun.ready;
      log(`held, round ${round}: ${JSON.stringify(ready)}`);
      await sleep(settleSeconds * 1000);
      const [withHeld, heldCores] = await cores(heldRun.child.pid, () => list(options.heldDurationSeconds));
      pairs.push({ ready, alone, held: withHeld, ratio: withHeld.p99 / alone.p99, aloneCores, heldCores });
      row(`list, 100 IDs, no stations (round ${round})`, alone);
      log(`    ${coresText(aloneCores)}`);
      row(`list, 100 IDs, ${options.held} stations held (round ${round})`, withHeld);
      log(`    ${coresText(heldCores)}`);
      await stopChild(heldRun.child);
      // The service sees every socket close and releases them before the next window.
      await sleep(5000);
    }
    const heldRatio = median(pairs.map((p) => p.ratio));
    log(`  RSS ${rssBefore.toFixed(0)} -> ${rssHeld.toFixed(0)} MiB: ${perConnectionKiB.toFixed(1)} KiB per held station (target <= 30 KB)`);
    log(`  list p99 held / alone, round by round: ${pairs.map((p) => `${p.ratio.toFixed(2)}x`).join(', ')}; median ${heldRatio.toFixed(2)}x (target <= 1.5x)`);

    results.storms = await storms();
    results.abuse = await abuse();
    Object.assign(results, {
      held: { warmUp: warmReady, rssBeforeMiB: rssBefore, rssHeldMiB: rssHeld, perConnectionKiB, holdingCores, rounds: pairs, listP99Ratio: heldRatio, aloneP99Ms: median(pairs.map((p) => p.alone.p99)) },
      networks: NETWORK_COUNT,
    });
    writeFileSync(options.out, `${JSON.stringify(results, null, 2)}\n`);
    log(`figures written to ${options.out}`);
  } finally {
    await stopAllChildren();
    await target.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch(async (error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  await stopAllChildren();
  process.exit(1);
});
