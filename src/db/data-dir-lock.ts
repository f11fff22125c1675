// The embedded database's folder admits one process at a time: PGlite keeps its own copy of the
// data in memory and writes it back, so a second process's writes are silently lost (or worse).
// A lock file in the folder names its holder; a second process is refused at once with a line
// saying who holds it and what to do. A lock whose holder is gone is taken over, never obeyed.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, utimesSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export type DataDirHolder = 'server' | 'cli';

interface LockRecord {
  pid: number;
  holder: DataDirHolder;
  since: string;
  host: string;
}

export const LOCK_FILE = 'cns.lock';
// A holder on another host (a container sharing the volume) cannot be asked whether it runs: it
// refreshes the file's time instead, and a lock not refreshed for STALE_MS is taken over.
const REFRESH_MS = 10_000;
const STALE_MS = 30_000;

// Operator mistakes about the folder itself: one line, saying what to do.
export class DataDirError extends Error {}

export interface DataDirLock {
  release(): void;
}

function describe(record: LockRecord): string {
  const who = record.holder === 'server' ? 'the server' : 'the CLI';
  const where = record.host === hostname() ? '' : ` on host ${record.host}`;
  return `${who} (pid ${record.pid}${where}, since ${record.since})`;
}

function readRecord(path: string): LockRecord | null {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockRecord>;
    if (typeof parsed.pid !== 'number' || (parsed.holder !== 'server' && parsed.holder !== 'cli')) return null;
    return { pid: parsed.pid, holder: parsed.holder, since: String(parsed.since), host: String(parsed.host) };
  } catch {
    // unreadable or half-written (its writer died between open and write): nobody holds it
    return null;
  }
}

function isRunning(pid: number): boolean {
  // Our own pid in an old lock is a previous life of this process (pid 1 in a restarted container).
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function isHeld(path: string, record: LockRecord | null): boolean {
  if (!record) return false;
  if (record.host === hostname()) return isRunning(record.pid);
  try {
    return Date.now() - statSync(path).mtimeMs < STALE_MS;
  } catch {
    return false;
  }
}

// What the running user must change when the folder is not theirs to write (a bind mount owned
// by another uid, a read-only or virtual file system).
export function folderProblem(dir: string, error: unknown): DataDirError {
  const code = (error as NodeJS.ErrnoException).code ?? String(error);
  const abs = resolve(dir);
  if (code === 'EACCES' || code === 'EPERM') {
    const owner = process.getuid ? `${process.getuid()}:${process.getgid?.()}` : 'the running user';
    return new DataDirError(
      `DATA_DIR ${abs} is not writable by this process (${code}): chown -R ${owner} ${abs}, or set DATA_DIR to a folder it may write`,
    );
  }
  return new DataDirError(`DATA_DIR ${abs} cannot hold the embedded database (${code}): set DATA_DIR to a writable folder on a real file system`);
}

// mkdir -p without Node's recursive mkdir, which loops for ever on a virtual file system that
// answers ENOENT for a parent that exists (/proc).
function makeFolder(path: string): void {
  try {
    mkdirSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(path).isDirectory()) return;
    const parent = dirname(path);
    if (code !== 'ENOENT' || parent === path || existsSync(parent)) throw error;
    makeFolder(parent);
    mkdirSync(path);
  }
}

// Creates the folder if needed and takes its lock, or throws a DataDirError.
export function lockDataDir(dir: string, holder: DataDirHolder, notice: (line: string) => void): DataDirLock {
  const abs = resolve(dir);
  const path = join(abs, LOCK_FILE);
  const record: LockRecord = { pid: process.pid, holder, since: new Date().toISOString(), host: hostname() };
  try {
    makeFolder(abs);
  } catch (error) {
    throw folderProblem(dir, error);
  }
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o644);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw folderProblem(dir, error);
      const existing = readRecord(path);
      if (isHeld(path, existing)) {
        throw new DataDirError(
          `DATA_DIR ${abs} is in use by ${describe(existing!)}: the embedded database admits one process at a time; ` +
            (existing!.holder === 'server' ? 'stop the server first' : 'wait for that command to finish') +
            ', or use PostgreSQL (DATABASE_URL), which any number of processes may share',
        );
      }
      // Read again just before removing: another process may have taken it over meanwhile.
      if (attempt > 2 || JSON.stringify(readRecord(path)) !== JSON.stringify(existing)) {
        throw new DataDirError(`DATA_DIR ${abs}: another process is taking over its lock; try again`);
      }
      try {
        unlinkSync(path);
      } catch (unlinkError) {
        if ((unlinkError as NodeJS.ErrnoException).code !== 'ENOENT') throw folderProblem(dir, unlinkError);
      }
      notice(
        existing
          ? `DATA_DIR ${abs}: taking over the lock of ${describe(existing)}, which is no longer running`
          : `DATA_DIR ${abs}: taking over an unreadable lock file`,
      );
      continue;
    }
    try {
      writeSync(fd, JSON.stringify(record));
    } finally {
      closeSync(fd);
    }
    break;
  }
  const refresh = setInterval(() => {
    const now = new Date();
    try {
      utimesSync(path, now, now);
    } catch {
      // the next refresh tries again; only a holder on another host reads the time
    }
  }, REFRESH_MS);
  refresh.unref();
  return {
    release() {
      clearInterval(refresh);
      // Only our own lock: never one a later process took over after deciding we were gone.
      const current = readRecord(path);
      if (current?.pid === process.pid && current.since === record.since) {
        try {
          unlinkSync(path);
        } catch {
          // already gone
        }
      }
    },
  };
}
