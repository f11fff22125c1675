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
}

export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index]!;
}

// Open-loop load: starts one request every 1/rate seconds whether or not earlier ones have
// answered (autocannon's rate limit is closed-loop: a slow answer delays the next request, so a
// 1 s password change would silently lower "5 per second" to fewer).
export async function runPaced(spec: { port: number; rate: number; durationSeconds: number; next: () => RequestShape }): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  let non2xx = 0;
  let socketErrors = 0;
  const inFlight: Promise<void>[] = [];
  const started = performance.now();
  const total = Math.round(spec.rate * spec.durationSeconds);
  const one = (r: RequestShape) =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = http.request(
        { host: LOOPBACK, port: spec.port, method: r.method, path: r.path, headers: { ...(r.headers ?? {}), ...(r.body ? { 'content-length': Buffer.byteLength(r.body) } : {}) }, agent, timeout: 30_000 },
        (res) => {
          res.resume();
          res.on('end', () => {
            const code = res.statusCode ?? 0;
            statusCodes[code] = (statusCodes[code] ?? 0) + 1;
            if (code < 200 || code > 299) non2xx++;
            latencies.push(performance.now() - t0);
            resolve();
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        socketErrors++;
        resolve();
      });
      req.end(r.body);
    });
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / spec.rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    inFlight.push(one(spec.next()));
  }
  await Promise.all(inFlight);
  agent.destroy();
  const sorted = Float64Array.from(latencies).sort();
  const durationSeconds = (performance.now() - started) / 1000;
  return {
    rps: latencies.length / Math.max(durationSeconds, spec.durationSeconds),
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    requests: latencies.length,
    non2xx,
    socketErrors,
    durationSeconds,
    statusCodes,
  };
}

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const latencies: number[] = [];
  const url = `http://${LOOPBACK}:${spec.port}`;
  if (new URL(url).hostname !== LOOPBACK) throw new Error('loads target 127.0.0.1 only');
  const instance = autocannon({
    url,
    connections: spec.connections,
    duration: spec.durationSeconds,
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
