import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon, { type AutocannonRequest } from 'autocannon';
import { LOOPBACK } from './processes.js';

export interface LoadResult {
  rps: number;
  // latency in milliseconds over every response (autocannon's own histogram has 1 ms resolution)
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  // socket errors and timeouts
  socketErrors: number;
  durationSeconds: number;
  statusCodes: Record<string, number>;
  // slowest answer, ms (measured by the closed-loop clients only)
  max?: number;
  // slowest answer among each client's first request, all sent at the same instant, ms
  firstRoundMax?: number;
}

export interface RequestShape {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadSpec {
  port: number;
  connections: number;
  durationSeconds: number;
  // a fresh request for every call (distinct IDs, unique sessions, …)
  next: () => RequestShape;
  overallRate?: number;
  // stop early after this many requests (e.g. when only that many distinct targets exist)
  maxRequests?: number;
  onResponse?: (status: number, body: string) => void;
  // Keeps the load running past `durationSeconds` until this settles (at most 120 s more): a
  // reconnect storm measured beside the list has the list at full load until its last station.
  until?: Promise<unknown>;
}

export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index]!;
}

interface Tally {
  latencies: number[];
  statusCodes: Record<string, number>;
  non2xx: number;
  socketErrors: number;
}

function newTally(): Tally {
  return { latencies: [], statusCodes: {}, non2xx: 0, socketErrors: 0 };
}

// One request over the agent; resolves with its latency in ms (NaN for a socket error), tallied.
function timedRequest(agent: http.Agent, port: number, r: RequestShape, tally: Tally): Promise<number> {
  return new Promise<number>((resolve) => {
    const t0 = performance.now();
    const req = http.request(
      { host: LOOPBACK, port, method: r.method, path: r.path, headers: { ...(r.headers ?? {}), ...(r.body ? { 'content-length': Buffer.byteLength(r.body) } : {}) }, agent, timeout: 30_000 },
      (res) => {
        res.resume();
        res.on('end', () => {
          const code = res.statusCode ?? 0;
          tally.statusCodes[code] = (tally.statusCodes[code] ?? 0) + 1;
          if (code < 200 || code > 299) tally.non2xx++;
          const ms = performance.now() - t0;
          tally.latencies.push(ms);
          resolve(ms);
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => {
      tally.socketErrors++;
      resolve(NaN);
    });
    req.end(r.body);
  });
}

function resultOf(tally: Tally, started: number, minimumSeconds: number): LoadResult {
  const sorted = Float64Array.from(tally.latencies).sort();
  const durationSeconds = (performance.now() - started) / 1000;
  return {
    rps: tally.latencies.length / Math.max(durationSeconds, minimumSeconds),
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    requests: tally.latencies.length,
    non2xx: tally.non2xx,
    socketErrors: tally.socketErrors,
    durationSeconds,
    statusCodes: tally.statusCodes,
  };
}

// Open-loop load: starts one request every 1/rate seconds whether or not earlier ones have
// answered (autocannon's rate limit is closed-loop: a slow answer delays the next request, so a
// 1 s password change would silently lower "5 per second" to fewer).
export async function runPaced(spec: { port: number; rate: number; durationSeconds: number; next: () => RequestShape }): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const tally = newTally();
  const inFlight: Promise<number>[] = [];
  const started = performance.now();
  const total = Math.round(spec.rate * spec.durationSeconds);
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / spec.rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    inFlight.push(timedRequest(agent, spec.port, spec.next(), tally));
  }
  await Promise.all(inFlight);
  agent.destroy();
  return resultOf(tally, started, spec.durationSeconds);
}

// Closed loop: `clients` callers each send a request, wait for its answer and send the next, until
// the time is up; all of them send their first at the same instant. Reports the slowest answer
// overall and the slowest of that first round (the last of `clients` simultaneous requests).
export async function runClients(spec: { port: number; clients: number; durationSeconds: number; next: () => RequestShape }): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: spec.clients });
  const tally = newTally();
  const started = performance.now();
  const deadline = started + spec.durationSeconds * 1000;
  const firstRound: number[] = [];
  const client = async () => {
    firstRound.push(await timedRequest(agent, spec.port, spec.next(), tally));
    while (performance.now() < deadline) await timedRequest(agent, spec.port, spec.next(), tally);
  };
  await Promise.all(Array.from({ length: spec.clients }, client));
  agent.destroy();
  const finite = (values: number[]) => values.filter(Number.isFinite);
  return { ...resultOf(tally, started, spec.durationSeconds), max: Math.max(...finite(tally.latencies)), firstRoundMax: Math.max(...finite(firstRound)) };
}

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const latencies: number[] = [];
  const url = `http://${LOOPBACK}:${spec.port}`;
  if (new URL(url).hostname !== LOOPBACK) throw new Error('loads target 127.0.0.1 only');
  const instance = autocannon({
    url,
    connections: spec.connections,
    duration: spec.durationSeconds + (spec.until ? 120 : 0),
    timeout: 10,
    ...(spec.overallRate ? { overallRate: spec.overallRate } : {}),
    ...(spec.maxRequests ? { maxOverallRequests: spec.maxRequests } : {}),
    requests: [
      {
        setupRequest: (req: AutocannonRequest) => {
          const r = spec.next();
          return { ...req, method: r.method, path: r.path, headers: { ...(req.headers ?? {}), ...(r.headers ?? {}) }, body: r.body ?? '' };
        },
        ...(spec.onResponse ? { onResponse: (status: number, body: string) => spec.onResponse!(status, body) } : {}),
      },
    ],
  });
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
    latencies.push(responseTime);
  });
  if (spec.until) {
    const settled = spec.until.then(
      () => undefined,
      () => undefined,
    );
    void Promise.all([sleep(spec.durationSeconds * 1000), settled]).then(() => instance.stop());
  }
  const result = await instance;
  const sorted = Float64Array.from(latencies).sort();
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  const durationSeconds = (result.finish.getTime() - result.start.getTime()) / 1000 || spec.durationSeconds;
  return {
    rps: latencies.length / durationSeconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    requests: latencies.length,
    non2xx: result.non2xx,
    socketErrors: result.errors, // autocannon counts timeouts among errors
    durationSeconds,
    statusCodes,
  };
}
