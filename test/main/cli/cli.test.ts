// The command line as a person meets it: the commands the service prints, and the CLI's help.
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { clientBaseUrl, cliCommand } from '../../../src/main/cli/printed-commands.js';
import { lockDataDir } from '../../../src/db/data-dir-lock.js';
import { freePort } from '../../helpers/probe-app.js';
import { outputLines, runProcess } from '../../helpers/service-process.js';

describe('printed commands', () => {
  it('name the CLI as it runs where the service runs: plain node in a compiled install (the image has no tsx), npm run in a checkout', () => {
    expect(cliCommand('file:///app/dist/main/cli/printed-commands.js')).toBe('node dist/cli.js');
    expect(cliCommand('file:///home/me/cns/src/main/cli/printed-commands.ts')).toBe('npm run cli --');
    // this test runs the sources
    expect(cliCommand()).toBe('npm run cli --');
  });

  it('reach a server listening on every interface through the loopback address, and PUBLIC_URL when it is set', () => {
    const at = (host: string, port: number) => clientBaseUrl({ host, publicUrl: undefined }, port);
    expect(at('0.0.0.0', 8080)).toBe('http://127.0.0.1:8080');
    expect(at('::', 3000)).toBe('http://127.0.0.1:3000');
    expect(at('::1', 3000)).toBe('http://[::1]:3000');
    expect(at('10.1.2.3', 3000)).toBe('http://10.1.2.3:3000');
    expect(clientBaseUrl({ host: '0.0.0.0', publicUrl: 'https://charging.example' }, 3000)).toBe('https://charging.example');
  });
});

describe('cli help and mistakes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cns-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('--help, and each command\'s --help, print usage and exit 0 without configuration or the database', { timeout: 90_000 }, async () => {
    // The folder is held and the configuration is invalid: help needs neither.
    const lock = lockDataDir(dir, 'server', () => undefined);
    try {
      const env = { DATA_DIR: dir, PORT: 'not-a-port' };
      const cases: [string[], RegExp][] = [
        [['--help'], /clients create[\s\S]*clients list[\s\S]*clients revoke[\s\S]*demo-data[\s\S]*station/],
        [['clients', '--help'], /clients create[\s\S]*clients list[\s\S]*clients revoke/],
        [['clients', 'create', '--help'], /cli clients create --name NAME --scopes/],
        [['demo-data', '--help'], /cli demo-data +record demo session payments/],
        [['station', '--help'], /cli station --id ASSET_ID \[--url[\s\S]*STATION_PASSWORD[\s\S]*never from the command line/],
      ];
      const results = await Promise.all(cases.map(([args]) => runProcess(['src/cli.ts', ...args], env)));
      results.forEach((result, i) => {
        expect({ args: cases[i]![0], code: result.code, stderr: result.stderr }).toEqual({ args: cases[i]![0], code: 0, stderr: '' });
        expect(result.stdout).toMatch(cases[i]![1]);
      });
      // A command's own help shows that command only.
      expect(results[3]!.stdout).not.toContain('clients');
    } finally {
      lock.release();
    }
  });

  it('an unknown command says so, with the usage, and exits 2', { timeout: 60_000 }, async () => {
    const [unknown, unknownSub] = await Promise.all([
      runProcess(['src/cli.ts', 'frobnicate'], { DATA_DIR: dir }),
      runProcess(['src/cli.ts', 'clients', 'frob'], { DATA_DIR: dir }),
    ]);
    expect(unknown.code).toBe(2);
    expect(outputLines(unknown.stderr)[0]).toBe('unknown command "frobnicate"');
    expect(unknown.stderr).toContain('cli demo-data');
    expect(unknownSub.code).toBe(2);
    expect(outputLines(unknownSub.stderr)[0]).toBe('unknown command "clients frob"');
  });
});

describe('a DATA_DIR the process cannot use', () => {
  it('is one line saying what to chown when the folder is not the running user\'s, and one clear line under /proc; exit 1 either way', { timeout: 60_000 }, async () => {
    const parent = mkdtempSync(join(tmpdir(), 'cns-unwritable-'));
    try {
      // Root may write anywhere: the folder then belongs to nobody, as a bind-mounted folder of
      // someone else meets a container user, and the server runs without root's power to
      // override file permissions (it still reads the checkout, which root owns, wherever it is).
      const asRoot = process.getuid?.() === 0;
      if (asRoot) {
        chownSync(parent, 65534, 65534);
        chmodSync(parent, 0o755);
      } else chmodSync(parent, 0o555);
      const prefix = asRoot ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search', '--'] : [];
      const data = join(parent, 'data');
      const [unwritable, proc] = await Promise.all([
        runProcess(['src/server.ts'], { DATA_DIR: data, PORT: String(await freePort()), HOME: tmpdir() }, { prefix, guardMs: 30_000 }),
        runProcess(['src/server.ts'], { DATA_DIR: '/proc/cns-data', PORT: String(await freePort()) }, { guardMs: 30_000 }),
      ]);
      const owner = `${process.getuid?.()}:${process.getgid?.()}`;
      expect({ code: unwritable.code, lines: outputLines(unwritable.stderr) }).toEqual({
        code: 1,
        lines: [`failed to start: DATA_DIR ${data} is not writable by this process (EACCES): chown -R ${owner} ${data}, or set DATA_DIR to a folder it may write`],
      });
      expect({ code: proc.code, lines: outputLines(proc.stderr) }).toEqual({
        code: 1,
        lines: ['failed to start: DATA_DIR /proc/cns-data cannot hold the embedded database (ENOENT): set DATA_DIR to a writable folder on a real file system'],
      });
    } finally {
      chmodSync(parent, 0o755);
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
