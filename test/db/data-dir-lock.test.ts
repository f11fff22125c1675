// The embedded database's folder is held by one process at a time (docs/operations.md), tried with real
// server and CLI processes.
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tryLock } from 'fs-native-extensions';
import { afterAll, describe, expect, it } from 'vitest';
import { DataDirError, LOCK_FILE, lockDataDir } from '../../src/db/data-dir-lock.js';
import { freePort } from '../helpers/probe-app.js';
import { killProcess, outputLines, runProcess, startProcess, waitUntilHealthy } from '../helpers/service-process.js';
import { createServerDatabase } from '../helpers/test-database.js';

const folders: string[] = [];
function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cns-lock-'));
  folders.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

const SINCE = '\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z';

describe('the embedded database folder, between processes', () => {
  const dir = folder();
  let server: ReturnType<typeof startProcess> | undefined;
  afterAll(() => killProcess(server?.child));

  it('a CLI command and a second server next to a running server are refused at once, naming the server; a server killed leaves a lock the next process takes over', { timeout: 120_000 }, async () => {
    const port = await freePort();
    server = startProcess(['src/server.ts'], { DATA_DIR: dir, PORT: String(port) });
    await waitUntilHealthy(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status, server.child);
    const pid = server.child.pid!;

    const cli = await runProcess(['src/cli.ts', 'demo-data'], { DATA_DIR: dir });
    expect(cli.code).toBe(1);
    expect(cli.stdout).toBe('');
    const [line, ...more] = outputLines(cli.stderr);
    expect(more).toEqual([]);
    expect(line).toMatch(new RegExp(`^DATA_DIR ${dir} is in use by the server \\(pid ${pid}, since ${SINCE}\\): .*stop the server first.*DATABASE_URL`));

    const second = await runProcess(['src/server.ts'], { DATA_DIR: dir, PORT: String(await freePort()) });
    expect(second.code).toBe(1);
    expect(outputLines(second.stderr)).toEqual([expect.stringMatching(new RegExp(`^failed to start: DATA_DIR ${dir} is in use by the server \\(pid ${pid}, `))]);

    // The station command talks to a server over the network and needs no database: no lock.
    const station = await runProcess(['src/cli.ts', 'station'], { DATA_DIR: dir });
    expect(station.stderr).toContain('--id is required');
    expect(station.stderr).not.toContain('in use');

    // Killed without a chance to release its lock: the next process finds it stale.
    await killProcess(server.child);
    const list = await runProcess(['src/cli.ts', 'clients', 'list'], { DATA_DIR: dir });
    expect(outputLines(list.stderr)).toEqual([
      expect.stringMatching(new RegExp(`^DATA_DIR ${dir}: taking over the lock of the server \\(pid ${pid}, since ${SINCE}\\), which is no longer running$`)),
    ]);
    expect(list.code).toBe(0);
    // What the server wrote is there (the bootstrap client), and the CLI let go of the folder.
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ name: 'bootstrap-admin' })]);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  });

  it('a server whose folder a CLI command holds is refused, naming the CLI', { timeout: 60_000 }, async () => {
    const held = folder();
    const lock = lockDataDir(held, 'cli', () => undefined);
    try {
      const refused = await runProcess(['src/server.ts'], { DATA_DIR: held, PORT: String(await freePort()) });
      expect(refused.code).toBe(1);
      expect(outputLines(refused.stderr)).toEqual([
        expect.stringMatching(new RegExp(`^failed to start: DATA_DIR ${held} is in use by the CLI \\(pid ${process.pid}, since ${SINCE}\\): .*wait for that command to finish`)),
      ]);
    } finally {
      lock.release();
    }
  });

  if (process.env.DATABASE_URL) {
    it('with DATABASE_URL the folder is nobody\'s: a CLI command runs beside a process holding it (PostgreSQL)', { timeout: 60_000 }, async () => {
      const held = folder();
      const lock = lockDataDir(held, 'server', () => undefined);
      const database = await createServerDatabase();
      try {
        const list = await runProcess(['src/cli.ts', 'clients', 'list'], { DATA_DIR: held, ...database.env });
        expect({ code: list.code, stderr: list.stderr }).toEqual({ code: 0, stderr: '' });
        expect(JSON.parse(list.stdout)).toEqual([]);
      } finally {
        lock.release();
        await database.drop();
      }
    });
  }
});

describe('lockDataDir', () => {
  it('refuses a second holder, even in the same process, and lets go on release', () => {
    const dir = folder();
    const lock = lockDataDir(dir, 'server', () => undefined);
    // The lock belongs to the open file, not to the process: a second open of it is refused too.
    expect(() => lockDataDir(dir, 'cli', () => undefined)).toThrow(
      new RegExp(`^DATA_DIR ${dir} is in use by the server \\(pid ${process.pid}, since ${SINCE}\\): .*stop the server first`),
    );
    lock.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    const notices: string[] = [];
    lockDataDir(dir, 'cli', (line) => notices.push(line)).release();
    expect(notices).toEqual([]);
  });

  it('release removes only the lock file it holds, never one that replaced it', () => {
    const dir = folder();
    const path = join(dir, LOCK_FILE);
    const first = lockDataDir(dir, 'server', () => undefined);
    // Someone deleted the held file by hand, and another holder made a new one.
    rmSync(path);
    const second = lockDataDir(dir, 'cli', () => undefined);
    first.release();
    expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({ pid: process.pid, holder: 'cli' });
    expect(() => lockDataDir(dir, 'server', () => undefined)).toThrow(/in use by the CLI/);
    second.release();
    expect(existsSync(path)).toBe(false);
  });

  it('takes over a lock file whose holder let go without removing it, whatever it says, with a line naming it', () => {
    const dir = folder();
    const path = join(dir, LOCK_FILE);
    const notices: string[] = [];
    writeFileSync(path, '{"pid":');
    lockDataDir(dir, 'cli', (line) => notices.push(line)).release();
    // A record of another host, however fresh, holds nothing: only a lock the file system keeps does.
    writeFileSync(path, JSON.stringify({ pid: 4_000_000, holder: 'server', since: '2026-01-01T00:00:00.000Z', host: 'another-container' }));
    lockDataDir(dir, 'cli', (line) => notices.push(line)).release();
    writeFileSync(path, '');
    lockDataDir(dir, 'cli', (line) => notices.push(line)).release();
    expect(notices).toEqual([
      `DATA_DIR ${dir}: taking over an unreadable lock file`,
      `DATA_DIR ${dir}: taking over the lock of the server (pid 4000000 on host another-container, since 2026-01-01T00:00:00.000Z), which is no longer running`,
    ]);
    expect(existsSync(path)).toBe(false);
  });

  it('a refusal names a holder on another host as its record says, and one without a record as another process', () => {
    const dir = folder();
    const path = join(dir, LOCK_FILE);
    // A holder the test cannot start (a container elsewhere): its lock, taken directly, and its record.
    writeFileSync(path, JSON.stringify({ pid: 4_000_000, holder: 'server', since: '2026-01-01T00:00:00.000Z', host: 'another-container' }));
    const fd = openSync(path, 'r+');
    try {
      expect(tryLock(fd)).toBe(true);
      expect(() => lockDataDir(dir, 'cli', () => undefined)).toThrow(
        new RegExp(`^DATA_DIR ${dir} is in use by the server \\(pid 4000000 on host another-container, since 2026-01-01T00:00:00.000Z\\): .*stop the server first`),
      );
      writeFileSync(path, '');
      expect(() => lockDataDir(dir, 'cli', () => undefined)).toThrow(
        new RegExp(`^DATA_DIR ${dir} is in use by another process: .*stop it first, or use PostgreSQL \\(DATABASE_URL\\)`),
      );
      expect(() => lockDataDir(dir, 'cli', () => undefined)).toThrow(DataDirError);
    } finally {
      closeSync(fd);
    }
    lockDataDir(dir, 'cli', () => undefined).release();
  });
});
