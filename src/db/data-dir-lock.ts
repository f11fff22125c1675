// The embedded database's folder admits one process at a time: PGlite keeps its own copy of the
// data in memory and writes it back, so a second process's writes are silently lost (or worse).
//
// The exclusion is an OS advisory lock on a lock file in the folder: an open file description lock
// (fcntl F_OFD_SETLK on Linux, flock(2) on macOS) through fs-native-extensions, whose prebuilt
// N-API binary loads on every Node the service runs on without compiling anything. The kernel
// (or, on NFS, the file server) decides who holds it, in one step, and drops it when its
// holder's process ends however it ends, so there is no stale lock to take over and no takeover
// to race: whatever the timing, one process holds it. A lock file with mtime staleness
// (proper-lockfile and what stood here before) cannot promise that: two processes that both judge
// a lock stale can each remove it and create their own (one removes the other's fresh lock), and
// a holder whose refreshes stall (a busy event loop, a suspended VM) loses its lock while it runs.
//
// The file's content only names the holder for the refusal message; it never decides anything.
import { closeSync, constants, existsSync, fstatSync, ftruncateSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { tryLock } from 'fs-native-extensions';

export type DataDirHolder = 'server' | 'cli';

interface LockRecord {
  pid: number;
  holder: DataDirHolder;
  since: string;
  host: string;
}

export const LOCK_FILE = 'cns.lock';
// A refusal that comes between the holder taking the lock and writing its record finds no record,
// or the one of the process before it: it reads again for up to this long before naming nobody.
const RECORD_WAIT_MS = 200;
const RECORD_POLL_MS = 5;
// Taking the lock starts over when the holder let go and removed the file meanwhile; only a
// process that loses that race every time gives up.
const MAX_ATTEMPTS = 20;

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

function parseRecord(text: string): LockRecord | null {
  try {
    const parsed = JSON.parse(text) as Partial<LockRecord>;
    if (typeof parsed.pid !== 'number' || (parsed.holder !== 'server' && parsed.holder !== 'cli')) return null;
    return { pid: parsed.pid, holder: parsed.holder, since: String(parsed.since), host: String(parsed.host) };
  } catch {
    return null;
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

// Who holds the lock, for the refusal message only. A holder on another host (a container) cannot
// be asked whether it runs, so its record is taken as written.
function currentHolder(path: string): LockRecord | null {
  for (let waited = 0; ; waited += RECORD_POLL_MS) {
    let record: LockRecord | null = null;
    try {
      record = parseRecord(readFileSync(path, 'utf8'));
    } catch {
      // gone or unreadable for now: the holder is replacing it
    }
    if (record && (record.host !== hostname() || isRunning(record.pid))) return record;
    if (waited >= RECORD_WAIT_MS) return null;
    sleepSync(RECORD_POLL_MS);
  }
}

function isSameFile(fd: number, path: string): boolean {
  try {
    const [held, named] = [fstatSync(fd), statSync(path)];
    return held.dev === named.dev && held.ino === named.ino;
  } catch {
    return false;
  }
}

// The open, locked lock file, or null when another process holds it. An open file description
// lock, not a classic POSIX record lock: that one is dropped when its process closes any
// descriptor of the file, and is never refused to the process that holds it.
function takeLock(dir: string, path: string): number | null {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o644);
    } catch (error) {
      throw folderProblem(dir, error);
    }
    let locked: boolean;
    try {
      locked = tryLock(fd);
    } catch (error) {
      closeSync(fd);
      // ENOLCK, EOPNOTSUPP: a file system that keeps no locks cannot keep the database safe either
      throw folderProblem(dir, error);
    }
    if (!locked) {
      closeSync(fd);
      return null;
    }
    // A holder that let go between our open and our lock removed the file: the lock we got is on a
    // file no other process will open. Only a lock on the file the path names counts.
    if (isSameFile(fd, path)) return fd;
    closeSync(fd);
  }
  throw new DataDirError(`DATA_DIR ${resolve(dir)}: its lock keeps changing hands; try again`);
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
  const fd = takeLock(dir, path);
  if (fd === null) {
    const current = currentHolder(path);
    const advice = !current ? 'stop it first' : current.holder === 'server' ? 'stop the server first' : 'wait for that command to finish';
    throw new DataDirError(
      `DATA_DIR ${abs} is in use by ${current ? describe(current) : 'another process'}: the embedded database admits one process at a time; ` +
        `${advice}, or use PostgreSQL (DATABASE_URL), which any number of processes may share`,
    );
  }
  try {
    // A holder that lets go removes the file, so a record still in it is one of a process that
    // ended without letting go (killed, crashed): worth a line, since its last writes may be lost.
    const left = readFileSync(fd, 'utf8');
    if (left.length > 0) {
      const previous = parseRecord(left);
      notice(
        previous
          ? `DATA_DIR ${abs}: taking over the lock of ${describe(previous)}, which is no longer running`
          : `DATA_DIR ${abs}: taking over an unreadable lock file`,
      );
    }
    ftruncateSync(fd, 0);
    writeSync(fd, JSON.stringify(record), 0);
  } catch (error) {
    closeSync(fd);
    throw folderProblem(dir, error);
  }
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      // Removed while still held, so that a file left behind always means a holder that did not let
      // go; a process that opened it meanwhile sees, once it gets the lock, that it is not the file
      // the path names, and starts over.
      try {
        if (isSameFile(fd, path)) unlinkSync(path);
      } catch {
        // already gone
      }
      closeSync(fd);
    },
  };
}
