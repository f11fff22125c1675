// The "webhooks" group of `npm run bench` (`npm run bench -- --webhooks`): what delivering events
// costs the API. Payment recording with two active subscriptions against none, in alternated
// windows; a backlog of events drained to a local receiver, with the 100-ID list beside it; a
// reconnect storm with two subscriptions against none. Figures, never pass/fail tests: the
// targets are printed next to them (docs/performance.md, "Webhooks").
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from '../src/auth/clients-service.js';
import { createBenchTarget, networkOf, openBenchDatabase, query, seedPayments, type BenchTarget } from './database.js';
import { runLoad, type LoadResult } from './load.js';
import { parseWebhookOptions, ROOT_DIR } from './options.js';
import { listBeside, recordBody } from './payment-requests.js';
import { median } from './report.js';
import { startBenchService } from './bench-service.js';
import { cpuMs, freePort, LOOPBACK, postgresCpuMs, runCommand, SERVER_NODE, stopAllChildren, stopChild } from './processes.js';
import { startStationFleet, stormPair, type StormFigures } from './webhook-storm.js';
import { startReceiver, type Receiver } from './webhook-receiver.js';
import { measureDeliveryFloor } from './delivery-floor.js';

const log = (line: string) => process.stdout.write(`${line}\n`);
const SUBSCRIPTIONS = ['a', 'b'] as const;
const EVENTS = ['payment.recorded', 'payment.collected', 'station.connected', 'station.disconnected'];

interface Api {
  port: number;
  token: string;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }>;
}

async function connectApi(port: number, clientId: string, clientSecret: string): Promise<Api> {
  const base = `http://${LOOPBACK}:${port}`;
  const res = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  const token = `Bearer ${((await res.json()) as { access_token: string }).access_token}`;
  return {
    port,
    token,
    async call(method, path, body) {
      const r = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await r.text();
      return { status: r.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    },
  };
}

// Waits until the receiver has every event of every active subscription; false when the safety
// net (`seconds`) ran out first.
async function drained(receiver: Receiver, expected: Record<string, number>, seconds = 600): Promise<boolean> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (Object.entries(expected).every(([name, n]) => receiver.distinct(name) >= n)) return true;
    await sleep(50);
  }
  return false;
}

interface RecordWindow extends LoadResult {
  created: number;
  // CPU ms per payment recorded; pg null on PGlite (it is the service's process).
  cpu: { service: number; pg: number | null; harness: number };
}

const recordRow = (name: string, r: RecordWindow) => {
  row(name, r);
  log(`    cpu ms per payment: service ${r.cpu.service.toFixed(3)}${r.cpu.pg === null ? '' : ` + PostgreSQL ${r.cpu.pg.toFixed(3)}`} + harness ${r.cpu.harness.toFixed(3)}`);
};

const row = (name: string, r: LoadResult) =>
  log(`  ${name.padEnd(52)} ${r.rps.toFixed(0).padStart(6)} rps  p50 ${r.p50.toFixed(1)} ms  p99 ${r.p99.toFixed(1)} ms  non-2xx ${r.non2xx}  errors ${r.socketErrors}`);

async function main(target: BenchTarget): Promise<void> {
  const options = parseWebhookOptions(process.argv.slice(2), process.env);
  const node = (await runCommand(SERVER_NODE, ['--version'], { cwd: ROOT_DIR, timeoutMs: 10_000 })).stdout.trim();
  const load = os.loadavg().map((l) => l.toFixed(2)).join(' ');
  log(`webhooks benchmark, ${new Date().toISOString()}, service on Node ${node}, ${os.availableParallelism()} cores, load average ${load}, ${target.kind}`);
  if (options.build) {
    const build = await runCommand('npm', ['run', 'build'], { cwd: ROOT_DIR, timeoutMs: 300_000 });
    if (build.code !== 0) throw new Error(`npm run build failed:\n${build.stdout}\n${build.stderr}`);
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'cns-bench-webhooks-'));
  const results: Record<string, unknown> = { startedAt: new Date().toISOString(), options, database: target.kind, serverNode: node, loadAverageAtStart: os.loadavg() };
  const receiver = await startReceiver();
  try {
    const database = await openBenchDatabase(target);
    const client = await createClient(database.db, {
      name: 'bench-webhooks',
      scopes: ['read:sessionpayment', 'write:sessionpayment', 'read:webhooks', 'write:webhooks', 'read:asset'],
      isAdmin: true,
    });
    await seedPayments(database, 0, 10_000, () => undefined);
    const [sample] = await query<{ document: string }>(database, 'select document from session_payments limit 1');
    const fleet = options.storm > 0 ? await startStationFleet(database, options.storm, dir) : undefined;
    await database.close();

    const port = await freePort();
    // The receiver is on 127.0.0.1.
    const service = await startBenchService('service', port, target, dir, { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' });
    const api = await connectApi(port, client.clientId, client.clientSecret);
    const ids: Record<string, string> = {};
    for (const name of SUBSCRIPTIONS) {
      const made = await api.call('POST', '/webhooks/v1/subscriptions', { url: receiver.url(name), events: EVENTS, description: `bench ${name}` });
      if (made.status !== 201) throw new Error(`creating a subscription answered ${made.status}: ${JSON.stringify(made.json)}`);
      ids[name] = (made.json.data as { id: string }).id;
    }
    const setActive = async (active: boolean) => {
      for (const name of SUBSCRIPTIONS) {
        const res = await api.call('PATCH', `/webhooks/v1/subscriptions/${ids[name]}`, { status: active ? 'ENABLED' : 'DISABLED' });
        if (res.status !== 200) throw new Error(`PATCH of a subscription answered ${res.status}`);
      }
    };
    await setActive(false);

    // 1. Recording payments: none and two active subscriptions, alternated, `rounds` pairs.
    let seq = 0;
    const tag = Date.now().toString(36);
    // CPU per payment recorded in the window: the service's process, PostgreSQL's (every backend:
    // the API's and the delivery worker's), and the harness's (load generator and receiver).
    const record = async (): Promise<RecordWindow> => {
      let created = 0;
      const before = { service: cpuMs(service.pid) ?? 0, pg: target.kind === 'postgres' ? postgresCpuMs() : 0, harness: process.cpuUsage() };
      const result = await runLoad({
        port,
        connections: 32,
        durationSeconds: options.durationSeconds,
        next: () => ({ method: 'POST', path: '/payments/v1/session-payments', headers: { authorization: api.token, 'content-type': 'application/json' }, body: recordBody(tag, seq++) }),
        onResponse: (status) => (created += status === 201 ? 1 : 0),
      });
      const harness = process.cpuUsage(before.harness);
      const per = (ms: number) => (created > 0 ? ms / created : 0);
      const cpu = {
        service: per((cpuMs(service.pid) ?? 0) - before.service),
        pg: target.kind === 'postgres' ? per(postgresCpuMs() - before.pg) : null,
        harness: per((harness.user + harness.system) / 1000),
      };
      return Object.assign(result, { created, cpu });
    };
    await record(); // warm-up
    const pairs: Array<{ none: RecordWindow; two: RecordWindow; ratio: number; drainedMs: number }> = [];
    for (let round = 1; round <= options.rounds; round++) {
      const order = round % 2 === 1 ? (['none', 'two'] as const) : (['two', 'none'] as const);
      const pair: Partial<Record<'none' | 'two', RecordWindow>> = {};
      let drainedMs = 0;
      for (const kind of order) {
        await setActive(kind === 'two');
        const before = Object.fromEntries(SUBSCRIPTIONS.map((n) => [n, receiver.distinct(n)]));
        pair[kind] = await record();
        if (kind === 'two') {
          // The window's deliveries finish before the next window starts, so none is charged to it.
          const started = performance.now();
          const created = pair.two!.created;
          if (!(await drained(receiver, Object.fromEntries(SUBSCRIPTIONS.map((n) => [n, before[n]! + created]))))) log('    its deliveries were not all made within 10 minutes');
          drainedMs = performance.now() - started;
        }
      }
      const ratio = pair.two!.rps / pair.none!.rps;
      pairs.push({ none: pair.none!, two: pair.two!, ratio, drainedMs });
      recordRow(`record payment, no subscription (round ${round})`, pair.none!);
      recordRow(`record payment, two subscriptions (round ${round})`, pair.two!);
      log(`    ratio ${ratio.toFixed(3)}; its deliveries done ${(drainedMs / 1000).toFixed(1)} s after the window`);
    }
    const recordRatio = median(pairs.map((p) => p.ratio));
    log(`  recording throughput, two subscriptions / none, round by round: ${pairs.map((p) => p.ratio.toFixed(3)).join(', ')}; median ${recordRatio.toFixed(3)} (target >= 0.9)`);
    for (const kind of ['none', 'two'] as const) {
      const part = (f: (w: RecordWindow) => number | null) => {
        const values = pairs.map((p) => f(p[kind])).filter((v): v is number => v !== null);
        return values.length > 0 ? median(values).toFixed(3) : '-';
      };
      log(`  cpu ms per payment, ${kind === 'none' ? 'no subscription' : 'two subscriptions'} (medians): service ${part((w) => w.cpu.service)}, PostgreSQL ${part((w) => w.cpu.pg)}, harness ${part((w) => w.cpu.harness)}`);
    }
    results.record = { rounds: pairs, ratio: recordRatio };

    // The delivery floor: what two deliveries' requests cost at the least, without and (on
    // PostgreSQL) with a row written for each, beside what recording a payment costs, bounds the
    // ratio from CPU (bench/README.md, "The delivery floor").
    const cpuOf = (w: RecordWindow) => w.cpu.service + (w.cpu.pg ?? 0) + w.cpu.harness;
    const recordCpu = median(pairs.map((p) => cpuOf(p.none)));
    const fromCpu = median(pairs.map((p) => cpuOf(p.none) / cpuOf(p.two)));
    log(`  from CPU: the service's two subscriptions read ${fromCpu.toFixed(3)} (CPU per payment none / two, median of the rounds; none ${recordCpu.toFixed(3)} ms)`);
    const floors = [];
    for (const databaseUrl of target.kind === 'postgres' ? [undefined, target.url] : [undefined]) {
      const floor = await measureDeliveryFloor(receiver.url('floor'), sample!.document, { databaseUrl });
      const twoFloor = (2 * (floor.senderMicros + floor.receiverMicros + (floor.postgresMicros ?? 0))) / 1000;
      const bound = recordCpu / (recordCpu + twoFloor);
      log(
        `  delivery floor, ${floor.postgresMicros === null ? 'the requests alone' : 'a row written for each'} (${floor.deliveries} bare signed POSTs, undici to this receiver, ${floor.perSecond.toFixed(0)}/s): cpu µs per delivery: sender ${floor.senderMicros.toFixed(1)} + receiver ${floor.receiverMicros.toFixed(1)}${floor.postgresMicros === null ? '' : ` + PostgreSQL ${floor.postgresMicros.toFixed(1)}`}; two a payment ${twoFloor.toFixed(3)} ms: at most ${bound.toFixed(3)}`,
      );
      floors.push({ ...floor, bound });
    }
    results.deliveryFloor = { recordCpuMs: recordCpu, ratioFromCpu: fromCpu, floors };

    // 2. A backlog drained: `backlog` events written at once into the outbox (as a pause of the
    // workers would leave them), one active subscription, the 100-ID list measured beside it.
    await setActive(false);
    const list = (seconds: number, until?: Promise<unknown>) => listBeside(port, api.token, seconds, until);
    const alone = await list(options.durationSeconds);
    row('list, 100 IDs, no deliveries', alone);
    const enabled = await api.call('PATCH', `/webhooks/v1/subscriptions/${ids.a}`, { status: 'ENABLED' });
    if (enabled.status !== 200) throw new Error(`PATCH answered ${enabled.status}`);
    const writer = await openBenchDatabase(target);
    const before = receiver.distinct('a');
    await query(
      writer,
      `insert into events (network, type, data)
       select p.network, 'payment.recorded', p.document from generate_series(1, ${options.backlog}) g
         join session_payments p on p.session = 'ses_bench_' || (g % 10000)`,
    );
    await writer.close();
    const written = performance.now();
    const during: LoadResult[] = [];
    const done = drained(receiver, { a: before + options.backlog });
    let finished = false;
    void done.then(() => (finished = true));
    while (!finished) {
      const window = await list(Math.min(5, options.durationSeconds));
      if (!finished) during.push(window);
    }
    // The safety net may end the wait first: the rate is then what was delivered by then.
    const complete = await done;
    const delivered = receiver.distinct('a') - before;
    const drainSeconds = ((complete ? receiver.lastAt() : performance.now()) - written) / 1000;
    const perSecond = delivered / drainSeconds;
    const duringP99 = median(during.map((w) => w.p99));
    for (const [i, w] of during.entries()) row(`list, 100 IDs, during the drain (window ${i + 1})`, w);
    log(
      `  backlog of ${options.backlog}: ${complete ? 'drained' : `NOT drained: ${delivered} delivered`} in ${drainSeconds.toFixed(1)} s, ${perSecond.toFixed(0)} deliveries/s (target >= 500); duplicates ${receiver.received('a') - receiver.distinct('a')}`,
    );
    log(`  list p99 during the drain (median of ${during.length} windows) / without: ${duringP99.toFixed(1)} / ${alone.p99.toFixed(1)} ms = ${(duringP99 / alone.p99).toFixed(2)}x`);
    results.drain = { backlog: options.backlog, complete, delivered, seconds: drainSeconds, perSecond, listAlone: alone, listDuring: during, listP99Ratio: duringP99 / alone.p99 };

    // 3. The reconnect storm, without and with two subscriptions (station events).
    if (fleet) {
      const storms: StormFigures[] = [];
      for (const active of [false, true]) {
        await setActive(active);
        storms.push(await stormPair(fleet, port, active ? 'two subscriptions' : 'no subscription', (until) => list(options.durationSeconds, until), log));
      }
      results.storm = storms;
    }
    results.networks = networkOf(0);
    results.loadAverageAtEnd = os.loadavg();
    writeFileSync(options.out, `${JSON.stringify(results, null, 2)}\n`);
    log(`figures written to ${options.out}; load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    await stopChild(service);
  } finally {
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const target = await createBenchTarget(parseWebhookOptions(process.argv.slice(2), process.env).databaseUrl);
let stopping: Promise<void> | undefined;
// Stops the children and drops the database once, whoever asks first; exits with the first code.
async function stop(code: number): Promise<never> {
  if (!stopping) {
    stopping = (async () => {
      await stopAllChildren();
      await target.drop().catch((error: unknown) => process.stderr.write(`could not drop the bench database ${target.name}: ${String(error)}\n`));
      process.exit(code);
    })();
  }
  await stopping;
  return process.exit(code);
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`\n${signal}: stopping child processes and dropping the bench database`);
    void stop(130);
  });
}
await main(target).then(
  () => stop(0),
  (error: unknown) => {
    // After Ctrl-C the stopped server fails the harness's requests: that is not the error to show.
    if (!stopping) process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    return stop(1);
  },
);
