// The "abuse" group of the stations benchmark (`npm run bench -- --stations`, or alone with
// `--abuse`): what one misbehaving station, or a crowd of bad logins, costs everybody else. Each
// attack runs in a process of its own (bench/station-abuse.ts) for one window, right after a window
// without it; both windows measure the same things: the service's RSS, the 100-ID payment list's
// and /healthz's p99, and how long another station takes to log in from another address.
// Figures, never pass/fail tests: the targets are printed next to them.
//
// The attackers model remote ones: a remote attacker's CPU is not the service's. On one machine
// they would take the service's cores (its slow /healthz and logins during a login crowd were the
// attackers' own process at work), so they run with SCHED_IDLE (`chrt --idle 0`): they get only
// the CPU nothing else wants, the service and the measuring clients always go first. They honour
// nothing else (no Retry-After, no backoff). So an attack is as strong as the spare CPU of the
// machine; the attacker's counts (calls sent, attempts) are printed with each figure.
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RPCClient } from 'ocpp-rpc';
import { sessionOf } from './database.js';
import { runLoad, runPaced, percentile, type LoadResult } from './load.js';
import { ROOT_DIR } from './options.js';
import { cpuMs, rssMiB, startChild, stopChild } from './processes.js';

type Station = [id: string, password: string];

export interface AbuseContext {
  port: number;
  // Stops the service process and starts a fresh one on the same port and database; its pid.
  // Each attack meets a fresh process, so what one attack left behind (a heap grown to hold a
  // flood, calls still queued) is never counted against the next.
  restartService(): Promise<number>;
  // `Bearer …`, for the payment list.
  token: string;
  windowSeconds: number;
  // Per-attack bounds (the quick variant sends less).
  maxFloodCalls: number;
  maxNonReaderMiB: number;
  // Stations with generated passwords: the flooding one, the non-reading one.
  flood: Station;
  nonReader: Station;
  // The asset the wrong passwords are tried on (a supplied password, argon2id).
  wrongPasswordTarget: Station;
  // The other station whose logins are timed: one with a generated password, one with a supplied one.
  probes: { hmac: Station; argon2id: Station };
  dir: string;
  log(line: string): void;
}

// The other station logs in from its own address; the attackers use others.
const PROBE_ADDRESS = '127.0.0.2';
const LOGIN_ATTACK_ADDRESS = '127.0.0.3';
const TRICKLE_ADDRESS = '127.0.0.4';
const LIST_CONNECTIONS = 8;
const HEALTHZ_RATE = 50;
const WRONG_PASSWORD_LOOPS = 300;
const TRICKLE_SOCKETS = 500;
const SETTLE_LIMIT_SECONDS = 60;
const WARM_UP_SECONDS = 5;

interface LoginTimes {
  ms: number[];
  failures: Record<string, number>;
}

interface Window {
  list: LoadResult;
  healthz: LoadResult;
  logins: { hmac: LoginTimes; argon2id: LoginTimes };
  rssBeforeMiB: number;
  rssPeakMiB: number;
  serviceCores: number;
  attacker?: Record<string, unknown>;
}

// One login of `station` from the probe address: the time from the TCP connect to the open socket.
async function timeLogin(port: number, [id, password]: Station, into: LoginTimes): Promise<void> {
  const client = new RPCClient({
    endpoint: `ws://127.0.0.1:${port}/ocpp`,
    identity: id,
    password,
    protocols: ['ocpp2.0.1'],
    strictMode: false,
    reconnect: false,
    pingIntervalMs: 0,
    wsOpts: { localAddress: PROBE_ADDRESS, handshakeTimeout: 10_000 },
  } as never) as unknown as { connect(): Promise<unknown>; close(o: object): Promise<unknown> };
  const started = performance.now();
  try {
    await client.connect();
    into.ms.push(performance.now() - started);
  } catch (error) {
    const key = String((error as { code?: unknown }).code ?? (error as Error).message);
    into.failures[key] = (into.failures[key] ?? 0) + 1;
  } finally {
    await client.close({ force: true }).catch(() => undefined);
  }
}

// A login of each probe station once a second (a slow one delays only its own next), for `seconds`.
async function probeLogins(ctx: AbuseContext, seconds: number): Promise<Window['logins']> {
  const logins: Window['logins'] = { hmac: { ms: [], failures: {} }, argon2id: { ms: [], failures: {} } };
  const end = Date.now() + seconds * 1000;
  const probe = async (station: Station, into: LoginTimes) => {
    while (Date.now() < end) {
      const started = Date.now();
      await timeLogin(ctx.port, station, into);
      await sleep(Math.max(0, 1000 - (Date.now() - started)));
    }
  };
  await Promise.all([probe(ctx.probes.hmac, logins.hmac), probe(ctx.probes.argon2id, logins.argon2id)]);
  return logins;
}

// Waits until the service has used less than a tenth of a core for a second (work an attack left
// queued runs on after it), at most `limitSeconds`; says how long that took.
async function settle(pid: number, limitSeconds: number): Promise<{ seconds: number; settled: boolean }> {
  const started = Date.now();
  while (Date.now() - started < limitSeconds * 1000) {
    const before = cpuMs(pid) ?? 0;
    await sleep(1000);
    if ((cpuMs(pid) ?? 0) - before < 100) return { seconds: (Date.now() - started) / 1000, settled: true };
  }
  return { seconds: limitSeconds, settled: false };
}

// SCHED_IDLE where util-linux's chrt is installed; otherwise the attackers compete with the service.
const IDLE_PREFIX = spawnSync('chrt', ['--idle', '0', 'true']).status === 0 ? 'chrt --idle 0 ' : '';

function startAttacker(ctx: AbuseContext, name: string, env: Record<string, string>) {
  const child = startChild(`abuse-${name}`, 'sh', ['-c', `ulimit -n "$(ulimit -Hn)" && exec ${IDLE_PREFIX}node --import tsx bench/station-abuse.ts`], {
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(ctx.port), DURATION_SECONDS: String(ctx.windowSeconds + 1), ...env },
    logFile: join(ctx.dir, `abuse-${name}.log`),
  });
  // Its JSON lines, and whoever waits for one of them.
  const events: Record<string, unknown>[] = [];
  const waiters: Array<() => void> = [];
  let buffer = '';
  child.process.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    for (const line of buffer.split('\n').slice(0, -1)) events.push(JSON.parse(line) as Record<string, unknown>);
    buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
    for (const wake of waiters) wake();
  });
  const seen = (event: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => {
        const found = events.find((e) => e.event === event);
        if (found) resolve(found);
      };
      waiters.push(check);
      check();
      void child.exited.then((code) => {
        check();
        reject(new Error(`abuse-${name} exited with ${code} before '${event}'`));
      });
    });
  return { child, started: seen('started'), done: seen('done') };
}

// One window: the list and /healthz under load, the probe logins, the service's RSS sampled every
// 100 ms; with `attack`, while it runs.
async function measureWindow(ctx: AbuseContext, pid: number, seconds: number, attack?: { name: string; env: Record<string, string> }): Promise<Window> {
  // From before the attacker starts: a flood is under way the moment it reports it has started.
  const rssBeforeMiB = rssMiB(pid) ?? NaN;
  let rssPeakMiB = rssBeforeMiB;
  const sampler = setInterval(() => (rssPeakMiB = Math.max(rssPeakMiB, rssMiB(pid) ?? 0)), 100);
  const attacker = attack ? startAttacker(ctx, attack.name, attack.env) : undefined;
  try {
    if (attacker) await attacker.started;
    const cpuBefore = cpuMs(pid) ?? 0;
    const started = performance.now();
    const [list, healthz, logins] = await Promise.all([
      runLoad({
        port: ctx.port,
        connections: LIST_CONNECTIONS,
        durationSeconds: seconds,
        next: () => ({
          method: 'GET',
          path: `/payments/v1/session-payments?sessionIds=${Array.from({ length: 100 }, () => sessionOf(Math.floor(Math.random() * 10_000))).join(',')}`,
          headers: { authorization: ctx.token },
        }),
      }),
      runPaced({ port: ctx.port, rate: HEALTHZ_RATE, durationSeconds: seconds, next: () => ({ method: 'GET', path: '/healthz' }) }),
      probeLogins(ctx, seconds),
    ]);
    const serviceCores = ((cpuMs(pid) ?? 0) - cpuBefore) / (performance.now() - started);
    let result: Record<string, unknown> | undefined;
    if (attacker) {
      result = await Promise.race([attacker.done, sleep(15_000).then(() => ({ event: 'done', note: 'no report within 15 s' }))]);
    }
    return { list, healthz, logins, rssBeforeMiB, rssPeakMiB, serviceCores, ...(result ? { attacker: result } : {}) };
  } finally {
    clearInterval(sampler);
    if (attacker) await stopChild(attacker.child);
  }
}

const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? '-' : `${v.toFixed(v < 10 ? 1 : 0)} ms`);

function loginText(t: LoginTimes): string {
  const sorted = [...t.ms].sort((a, b) => a - b);
  const failures = Object.keys(t.failures).length ? `; failed: ${JSON.stringify(t.failures)}` : '';
  return `median ${ms(percentile(sorted, 0.5))}, max ${ms(sorted.at(-1))} (${sorted.length} logins${failures})`;
}

// The slowest login, a failed one (refused, or no answer within the probe's 10 s) counting as worse.
function slowest(...all: LoginTimes[]): string {
  const failed = all.reduce((n, t) => n + Object.values(t.failures).reduce((a, b) => a + b, 0), 0);
  const max = Math.max(...all.flatMap((t) => t.ms));
  return failed ? `${failed} failed or over 10 s` : ms(max);
}

interface Attack {
  name: string;
  title: string;
  env: Record<string, string>;
  // MB the service's RSS may grow by during the attack.
  rssTarget?: number;
  // The slowest login the other station may see during the attack.
  loginTargetMs?: number;
}

export async function runAbuseGroup(ctx: AbuseContext): Promise<Record<string, unknown>> {
  const attacks: Attack[] = [
    {
      name: 'flood',
      title: 'CALL flood: one station sends BootNotification CALLs without waiting',
      env: { ATTACK: 'flood', STATION: ctx.flood[0], PASSWORD: ctx.flood[1], MAX_CALLS: String(ctx.maxFloodCalls) },
      rssTarget: 50,
    },
    {
      name: 'nonreader',
      title: 'non-reading station: sends Heartbeat CALLs with 32 KiB ids, never reads',
      env: { ATTACK: 'nonreader', STATION: ctx.nonReader[0], PASSWORD: ctx.nonReader[1], MAX_MIB: String(ctx.maxNonReaderMiB) },
      rssTarget: 50,
    },
    {
      name: 'wrongpass',
      title: `${WRONG_PASSWORD_LOOPS} concurrent wrong-password login loops against one argon2id asset (from ${LOGIN_ATTACK_ADDRESS})`,
      env: { ATTACK: 'wrongpass', STATION: ctx.wrongPasswordTarget[0], LOOPS: String(WRONG_PASSWORD_LOOPS), SOURCE: LOGIN_ATTACK_ADDRESS },
      loginTargetMs: 1000,
    },
    {
      name: 'trickle',
      title: `${TRICKLE_SOCKETS} upgrade requests trickling in a byte every 200 ms (from ${TRICKLE_ADDRESS})`,
      env: { ATTACK: 'trickle', STATION: ctx.wrongPasswordTarget[0], SOCKETS: String(TRICKLE_SOCKETS), SOURCE: TRICKLE_ADDRESS },
    },
  ];
  const figures: Record<string, unknown> = {};
  ctx.log(`\nabuse: for each attack a fresh service process, ${ctx.windowSeconds} s without the attack, then ${ctx.windowSeconds} s with it; list (100 IDs) at ${LIST_CONNECTIONS} connections, /healthz at ${HEALTHZ_RATE}/s, a login of two other stations from ${PROBE_ADDRESS} every second; attackers ${IDLE_PREFIX ? 'with SCHED_IDLE (chrt --idle 0)' : 'at normal priority (no chrt on this machine)'}`);
  for (const attack of attacks) {
    const pid = await ctx.restartService();
    // A fresh process grows its heap to what the load needs in its first seconds: not the attack's.
    await measureWindow(ctx, pid, Math.min(WARM_UP_SECONDS, ctx.windowSeconds));
    const without = await measureWindow(ctx, pid, ctx.windowSeconds);
    // The machine's load as the attack starts (other work on it slows every figure).
    const load = loadavg()[0]!;
    const during = await measureWindow(ctx, pid, ctx.windowSeconds, attack);
    // How long what the attack left queued in the service runs on after it.
    const busy = await settle(pid, SETTLE_LIMIT_SECONDS);
    const rssAfterMiB = rssMiB(pid) ?? NaN;
    // The attack's own growth: its peak over the peak of the same load without it (the list, /healthz
    // and the logins leave garbage of their own, collected or not).
    const growth = during.rssPeakMiB - without.rssPeakMiB;
    const listRatio = during.list.p99 / without.list.p99;
    const healthzRatio = during.healthz.p99 / without.healthz.p99;
    ctx.log(`  ${attack.name}: ${attack.title} (load average ${load.toFixed(1)} as it started)`);
    ctx.log(`    attacker: ${JSON.stringify(during.attacker ?? {})}`);
    ctx.log(`    RSS peak ${during.rssPeakMiB.toFixed(0)} MiB with the attack, ${without.rssPeakMiB.toFixed(0)} MiB with the same load without it: ${growth >= 0 ? '+' : ''}${growth.toFixed(0)} MiB${attack.rssTarget ? ` (target <= +${attack.rssTarget} MB)` : ''} (${during.rssBeforeMiB.toFixed(0)} MiB as the attack started, ${rssAfterMiB.toFixed(0)} MiB once settled); service ${during.serviceCores.toFixed(2)} cores (${without.serviceCores.toFixed(2)} without), busy ${busy.settled ? '' : 'still after '}${busy.seconds.toFixed(0)} s after the attack`);
    ctx.log(`    list p99 ${ms(during.list.p99)} vs ${ms(without.list.p99)} without: ${listRatio.toFixed(2)}x (${during.list.rps.toFixed(0)} vs ${without.list.rps.toFixed(0)} rps, non-2xx ${during.list.non2xx}, errors ${during.list.socketErrors})`);
    ctx.log(`    /healthz p99 ${ms(during.healthz.p99)} vs ${ms(without.healthz.p99)} without: ${healthzRatio.toFixed(2)}x (target <= 2x; non-2xx ${during.healthz.non2xx}, errors ${during.healthz.socketErrors})`);
    ctx.log(`    another station's login from ${PROBE_ADDRESS}, HMAC: ${loginText(during.logins.hmac)}; without: ${loginText(without.logins.hmac)}`);
    ctx.log(`    another station's login from ${PROBE_ADDRESS}, argon2id: ${loginText(during.logins.argon2id)}; without: ${loginText(without.logins.argon2id)}${attack.loginTargetMs ? ` (target: every login within ${attack.loginTargetMs} ms; slowest: ${slowest(during.logins.hmac, during.logins.argon2id)})` : ''}`);
    figures[attack.name] = { without, during, rssGrowthMiB: growth, loadAverage: load, attackersIdle: IDLE_PREFIX !== '', rssAfterMiB, busyAfter: busy, listP99Ratio: listRatio, healthzP99Ratio: healthzRatio };
  }
  return figures;
}
