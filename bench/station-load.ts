// The stations of the "stations" benchmark group, in a process of their own (bench/stations.ts
// starts it with a raised file-descriptor limit). Each station is an ocpp-rpc client: it connects
// with its password, sends BootNotification, and heartbeats until the process is told to stop.
//
// env: STATIONS_FILE (JSON [[id, password], …]), ENDPOINT (ws://…/ocpp), MODE (held | storm),
// HEARTBEAT_SECONDS, CONNECT_CONCURRENCY (held mode; storm connects everything at once).
// stdout: one JSON line per event ({ event: 'ready' | 'failed', … }).
import { readFileSync } from 'node:fs';
import { RPCClient } from 'ocpp-rpc';

const stations = JSON.parse(readFileSync(process.env.STATIONS_FILE!, 'utf8')) as Array<[string, string]>;
const endpoint = process.env.ENDPOINT!;
const mode = process.env.MODE ?? 'held';
const heartbeatMs = Number(process.env.HEARTBEAT_SECONDS ?? 5) * 1000;
const concurrency = mode === 'storm' ? stations.length : Number(process.env.CONNECT_CONCURRENCY ?? 200);

const clients: Array<{ close(o: object): Promise<unknown> }> = [];
const timers: NodeJS.Timeout[] = [];
const failures: Record<string, number> = {};
let heartbeats = 0;
let heartbeatFailures = 0;

async function station(id: string, password: string): Promise<number> {
  const client = new RPCClient({
    endpoint,
    identity: id,
    password,
    protocols: ['ocpp2.0.1'],
    strictMode: false,
    reconnect: false,
    // The service pings; the station only answers.
    pingIntervalMs: 0,
  } as never) as unknown as {
    connect(): Promise<unknown>;
    call(method: string, params: unknown): Promise<{ status?: string }>;
    close(o: object): Promise<unknown>;
  };
  const started = performance.now();
  await client.connect();
  clients.push(client);
  const boot = await client.call('BootNotification', { reason: 'PowerUp', chargingStation: { vendorName: 'bench', model: 'load' } });
  if (boot.status !== 'Accepted') throw new Error(`boot ${boot.status}`);
  const elapsed = performance.now() - started;
  // Spread over the interval, so heartbeats arrive evenly rather than in waves.
  const first = setTimeout(() => {
    const beat = () =>
      client.call('Heartbeat', {}).then(
        () => void heartbeats++,
        () => void heartbeatFailures++,
      );
    void beat();
    timers.push(setInterval(beat, heartbeatMs));
  }, Math.random() * heartbeatMs);
  timers.push(first);
  return elapsed;
}

const t0 = performance.now();
const times: number[] = [];
let next = 0;
async function worker() {
  while (next < stations.length) {
    const [id, password] = stations[next++]!;
    try {
      times.push(await station(id, password));
    } catch (error) {
      const key = (error as { code?: unknown; message?: string }).code ?? (error as Error).message;
      failures[String(key)] = (failures[String(key)] ?? 0) + 1;
    }
  }
}
await Promise.all(Array.from({ length: Math.min(concurrency, stations.length) }, worker));
const allDoneMs = performance.now() - t0;
times.sort((a, b) => a - b);
const pct = (q: number) => times[Math.min(times.length - 1, Math.max(0, Math.ceil(q * times.length) - 1))] ?? NaN;
process.stdout.write(
  `${JSON.stringify({ event: 'ready', accepted: times.length, failures, allDoneMs, p50Ms: pct(0.5), p99Ms: pct(0.99), maxMs: pct(1), rssMiB: process.memoryUsage().rss / 2 ** 20 })}\n`,
);

process.on('SIGTERM', () => {
  for (const t of timers) clearTimeout(t);
  process.stdout.write(`${JSON.stringify({ event: 'stopped', heartbeats, heartbeatFailures })}\n`);
  void Promise.all(clients.map((c) => c.close({ force: true }).catch(() => undefined))).then(() => process.exit(0));
});
