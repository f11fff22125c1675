import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from './probe-app.js';

// The project root: service processes run from here with `node --import tsx`.
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// The Node binary that runs service processes: SERVICE_NODE when set (CI's pass on the Docker
// image's Node names one), else the one running the tests.
export const SERVICE_NODE = process.env.SERVICE_NODE || process.execPath;

// Waits until the process answers 200 on /healthz. The deadline is a safety net for a cold tsx
// compile and the migrations, not a speed check.
export async function waitUntilHealthy(check: () => Promise<number>, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited early with ${child.exitCode}`);
    try {
      if ((await check()) === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error('server did not start listening');
}

// Stops a process the test started, if it still runs, and waits for it to be gone.
export async function killProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

// The environment a service process gets: only what is named, never the test runner's own
// (a DATABASE_URL of the suite must not leak into a process that is meant to run on PGlite).
export function serviceEnv(env: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', HOST: '127.0.0.1', ...env };
}

// Starts `node --import tsx <script> …args` from the project root, behind `prefix` (a command
// that runs the rest, such as setpriv) when one is given.
export function startProcess(args: string[], env: Record<string, string>, options: { prefix?: string[] } = {}) {
  const command = [...(options.prefix ?? []), SERVICE_NODE, '--import', 'tsx', ...args];
  const child = spawn(command[0]!, command.slice(1), { cwd: ROOT, env: serviceEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exited = new Promise<ProcessResult>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, ...output })));
  return { child, output, exited };
}

// Runs a command to its end. The guard only keeps a hanging process from hanging the suite
// (it shows as a SIGKILL in the result); it is not an assertion on speed.
export async function runProcess(
  args: string[],
  env: Record<string, string>,
  options: { guardMs?: number; prefix?: string[] } = {},
): Promise<ProcessResult> {
  const { child, exited } = startProcess(args, env, { prefix: options.prefix });
  const guard = setTimeout(() => child.kill('SIGKILL'), options.guardMs ?? 40_000);
  try {
    return await exited;
  } finally {
    clearTimeout(guard);
  }
}

export function outputLines(text: string): string[] {
  return text.split('\n').filter((line) => line.length > 0);
}

// A service process (src/server.ts) on a free port, returned once it answers /healthz.
export async function startService(env: Record<string, string>) {
  const port = await freePort();
  const started = startProcess(['src/server.ts'], { PORT: String(port), RATE_LIMIT_MAX: '0', ...env });
  const base = `http://127.0.0.1:${port}`;
  await waitUntilHealthy(async () => (await fetch(`${base}/healthz`)).status, started.child);
  return { ...started, base, endpoint: `ws://127.0.0.1:${port}/ocpp` };
}

// The bootstrap admin client a first start prints once it listens (so possibly after /healthz
// first answers), and a token of it with every scope.
export async function bootstrapToken(service: { base: string; child: ChildProcess; output: { stdout: string } }): Promise<{ clientId: string; clientSecret: string; token: string }> {
  const deadline = Date.now() + 30_000;
  let credentials: RegExpExecArray | null;
  while (!(credentials = /client_id:\s+(\S+)[\s\S]*?client_secret:\s+(\S+)/.exec(service.output.stdout))) {
    if (service.child.exitCode !== null) throw new Error(`server exited with ${service.child.exitCode} before printing its bootstrap client`);
    if (Date.now() > deadline) throw new Error(`no bootstrap client printed:\n${service.output.stdout}`);
    await sleep(50);
  }
  const [, clientId, clientSecret] = credentials as unknown as [string, string, string];
  const res = await fetch(`${service.base}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  if (res.status !== 200) throw new Error(`the bootstrap client got ${res.status} from /oauth/token: ${await res.text()}`);
  return { clientId, clientSecret, token: ((await res.json()) as { access_token: string }).access_token };
}
