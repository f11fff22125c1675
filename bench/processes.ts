import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export const LOOPBACK = '127.0.0.1';

// How every benchmark starts the service: with this Node unless BENCH_SERVER_NODE names another
// binary (the Docker image runs Node 24), and BENCH_SERVER_NODE_ARGS before the script (e.g.
// --cpu-prof).
export const SERVER_NODE = process.env.BENCH_SERVER_NODE ?? process.execPath;
export const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
export const SERVER_ARGS = [...SERVER_NODE_ARGS, 'dist/server.js'];

export interface Child {
  name: string;
  process: ChildProcess;
  pid: number;
  logFile: string;
  exited: Promise<number | null>;
}

// Every child this harness starts, so they can all be stopped on success, error or Ctrl-C.
const children = new Set<Child>();
// Short-lived commands (build, pgbench, psql), killed too if the harness is interrupted.
const commands = new Set<ChildProcess>();

export function startChild(name: string, command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; logFile: string }): Child {
  const log = createWriteStream(options.logFile);
  const proc = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  if (proc.pid === undefined) throw new Error(`could not start ${name}`);
  proc.stdout!.pipe(log, { end: false });
  proc.stderr!.pipe(log, { end: false });
  const exited = new Promise<number | null>((resolve) => {
    proc.on('exit', (code) => {
      children.delete(child);
      resolve(code);
    });
  });
  const child: Child = { name, process: proc, pid: proc.pid, logFile: options.logFile, exited };
  children.add(child);
  return child;
}

export async function stopChild(child: Child, timeoutMs = 10_000): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill('SIGTERM');
  const done = await Promise.race([child.exited.then(() => true), sleep(timeoutMs).then(() => false)]);
  if (!done) {
    child.process.kill('SIGKILL');
    await child.exited;
  }
}

export async function stopAllChildren(): Promise<void> {
  await Promise.all([...children].map((c) => stopChild(c)));
}

// Synchronous last resort for process exit handlers.
export function killAllChildrenNow(): void {
  for (const p of commands) {
    try {
      p.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const c of children) {
    try {
      c.process.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}

export function logTail(child: Child, lines = 30): string {
  try {
    return readFileSync(child.logFile, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, LOOPBACK, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

// Polls url until it answers with `status` (any status when undefined), or fails after timeoutMs.
export async function waitForHttp(child: Child, url: string, timeoutMs: number, status?: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (child.process.exitCode !== null) throw new Error(`${child.name} exited with code ${child.process.exitCode}:\n${logTail(child)}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (status === undefined || res.status === status) return;
      last = `HTTP ${res.status}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    await sleep(200);
  }
  throw new Error(`${child.name} did not become ready at ${url} within ${timeoutMs} ms (${last}):\n${logTail(child)}`);
}

// Resident set size of a live process in MiB, from /proc/<pid>/status (VmRSS), or null.
export function rssMiB(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return match ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}

export async function runCommand(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    commands.add(proc);
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), options.timeoutMs);
    proc.on('error', (error) => {
      commands.delete(proc);
      clearTimeout(timer);
      reject(error);
    });
    proc.on('close', (code) => {
      commands.delete(proc);
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ, 100 on every Linux architecture Node supports

// CPU time (user + system) a process has used so far, in milliseconds, or null.
// With includeReaped, also the CPU time of its children that have exited (cutime + cstime).
export function cpuMs(pid: number, includeReaped = false): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name, which may itself contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const own = Number(fields[11]) + Number(fields[12]);
    const reaped = includeReaped ? Number(fields[13]) + Number(fields[14]) : 0;
    return ((own + reaped) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

// CPU time used so far by the PostgreSQL servers on this machine, in milliseconds: every live
// postgres process plus the backends that have exited (reaped by the postmaster). It covers all
// databases and clients of the cluster, so it is only meaningful when nothing else uses it.
export function postgresCpuMs(): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
    } catch {
      continue;
    }
    total += cpuMs(Number(entry), true) ?? 0;
  }
  return total;
}
