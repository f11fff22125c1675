import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

// The project root: service processes run from here with `node --import tsx`.
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

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
