// The embedded database's first start fits the 512 MB container the README gives, on whichever
// Node runs the service (SERVICE_NODE: CI's pass on the Docker image's Node names that one),
// started as the image starts it: the built `node dist/server.js`, no npm, no NODE_OPTIONS. The
// bound is the process's peak RSS (VmHWM, which the kernel keeps, so no sample can miss it)
// with room to spare for what a container counts beside it. `npm run bench -- --memory` gives
// the figures themselves.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/probe-app.js';
import { killProcess, ROOT, SERVICE_NODE, serviceEnv, waitUntilHealthy } from '../helpers/service-process.js';

const CONTAINER_MIB = 512;
// Page cache and the container runtime's own share count against a container's limit too.
const HEADROOM_MIB = 64;
// What the database does in the first seconds after it answers (V8 optimises the hottest code in
// the background then) counts too: the peak is read after this long.
const SETTLE_MS = 5_000;

const nodeVersion = spawnSync(SERVICE_NODE, ['--version'], { encoding: 'utf8' }).stdout.trim();

const folders: string[] = [];
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

function statusMiB(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const kB = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kB === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Math.round(Number(kB) / 1024);
}

// One start of the compiled server on dataDir: its peak RSS once it has answered /readyz and
// settled, then a graceful stop.
async function peakOfStart(dataDir: string): Promise<{ peakMiB: number; exitCode: number | null }> {
  const port = await freePort();
  const env = serviceEnv({ NODE_ENV: 'production', PORT: String(port), DATA_DIR: dataDir });
  const child = spawn(SERVICE_NODE, ['dist/server.js'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const readyz = async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
    await waitUntilHealthy(readyz, child).catch((error: Error) => {
      throw new Error(`${error.message}: ${stderr}`);
    });
    await sleep(SETTLE_MS);
    const peakMiB = statusMiB(child.pid!, 'VmHWM');
    expect(await readyz()).toBe(200);
    child.kill('SIGTERM');
    return { peakMiB, exitCode: await exited };
  } finally {
    await killProcess(child);
  }
}

// The service process gets no DATABASE_URL (serviceEnv), so this is the embedded database in the
// PostgreSQL pass of the suite too.
describe(`the embedded database's start on Node ${nodeVersion}, as the image starts it`, () => {
  beforeAll(() => {
    // dist/ as `npm start` would leave it: compiled again only when the sources changed.
    const build = spawnSync(process.execPath, ['scripts/build.mjs', '--if-changed'], { cwd: ROOT, encoding: 'utf8' });
    if (build.status !== 0) throw new Error(`the build failed:\n${build.stdout}\n${build.stderr}`);
  }, 300_000);

  it(`fits ${CONTAINER_MIB} MB: the first start on an empty DATA_DIR and a second on the same folder each peak below ${CONTAINER_MIB - HEADROOM_MIB} MiB of RSS`, { timeout: 180_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cns-start-memory-'));
    folders.push(dataDir);
    const first = await peakOfStart(dataDir);
    const second = await peakOfStart(dataDir);
    expect(first.peakMiB, 'peak RSS of the first start, MiB').toBeLessThan(CONTAINER_MIB - HEADROOM_MIB);
    expect(second.peakMiB, 'peak RSS of the second start, MiB').toBeLessThan(CONTAINER_MIB - HEADROOM_MIB);
    expect([first.exitCode, second.exitCode]).toEqual([0, 0]);
  });
});
