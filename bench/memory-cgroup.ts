// A memory limit the kernel enforces, as a container runtime sets one: a child memory cgroup of
// the harness's own (so whatever limits the harness already has still apply), with the server
// exec'd inside it. Page cache counts against it, as in a container. Needs a writable cgroup
// file system (root, or a delegated cgroup); when there is none the caller says so.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface MemoryCgroup {
  description: string;
  // The command and arguments that run `command args…` inside the cgroup.
  wrap(command: string, args: string[]): { command: string; args: string[] };
  // The highest usage the kernel recorded (null where the kernel does not keep it).
  peakMiB(): number | null;
  oomKills(): number;
  remove(): Promise<void>;
}

const MiB = 1024 * 1024;

function readNumber(path: string): number | null {
  try {
    const n = Number(readFileSync(path, 'utf8').trim());
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

function counter(path: string, name: string): number {
  try {
    const match = new RegExp(`^${name} (\\d+)$`, 'm').exec(readFileSync(path, 'utf8'));
    return match ? Number(match[1]) : 0;
  } catch {
    return 0;
  }
}

// Returns the cgroup, or why there is none.
export function createMemoryCgroup(limitMiB: number): MemoryCgroup | string {
  let lines: string[];
  try {
    lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  } catch {
    return 'no /proc/self/cgroup (not Linux)';
  }
  const name = `cns-bench-${process.pid}`;
  const limit = String(limitMiB * MiB);
  const v1 = lines.map((l) => /^\d+:([^:]*):(.*)$/.exec(l)).find((m) => m?.[1]?.split(',').includes('memory'));
  try {
    if (v1) {
      const dir = join('/sys/fs/cgroup', v1[1]!, v1[2]!, name);
      mkdirSync(dir);
      writeFileSync(join(dir, 'memory.limit_in_bytes'), limit);
      try {
        writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), limit);
      } catch {
        // no swap accounting: the machine's swap (if any) is outside the limit
      }
      return handle(dir, `cgroup v1 ${dir} (memory.limit_in_bytes)`, () => readNumber(join(dir, 'memory.max_usage_in_bytes')), () => counter(join(dir, 'memory.oom_control'), 'oom_kill'));
    }
    const v2 = lines.map((l) => /^0::(.*)$/.exec(l)).find(Boolean);
    if (!v2) return 'no memory cgroup in /proc/self/cgroup';
    const dir = join('/sys/fs/cgroup', v2[1]!, name);
    mkdirSync(dir);
    if (!existsSync(join(dir, 'memory.max'))) {
      rmdirSync(dir);
      return `cgroup v2 without the memory controller delegated to ${join('/sys/fs/cgroup', v2[1]!)}`;
    }
    writeFileSync(join(dir, 'memory.max'), limit);
    writeFileSync(join(dir, 'memory.swap.max'), '0');
    return handle(dir, `cgroup v2 ${dir} (memory.max)`, () => readNumber(join(dir, 'memory.peak')), () => counter(join(dir, 'memory.events'), 'oom_kill'));
  } catch (error) {
    return `cannot create a memory cgroup (${(error as NodeJS.ErrnoException).code ?? String(error)})`;
  }
}

function handle(dir: string, description: string, peak: () => number | null, oomKills: () => number): MemoryCgroup {
  return {
    description,
    wrap(command, args) {
      // The shell moves itself into the cgroup, then becomes the command (same pid).
      return { command: '/bin/sh', args: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, command, ...args] };
    },
    peakMiB() {
      const bytes = peak();
      return bytes === null ? null : bytes / MiB;
    },
    oomKills,
    async remove() {
      // A cgroup is removable once its last process has gone, which the kernel notes a moment later.
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          rmdirSync(dir);
          return;
        } catch {
          await sleep(100);
        }
      }
    },
  };
}
