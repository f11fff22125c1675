// The files an operator runs the service with: no Docker engine here, so they are read, not run.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url);
const read = (file: string) => readFileSync(new URL(file, ROOT), 'utf8');

describe('deployment files', () => {
  it('the TLS keys the README has you make in the project folder are never committed', () => {
    const check = spawnSync('git', ['check-ignore', '--no-index', 'ocpp-key.pem', 'ocpp-cert.pem'], { cwd: ROOT, encoding: 'utf8' });
    expect(check.stdout.split('\n').filter(Boolean)).toEqual(['ocpp-key.pem', 'ocpp-cert.pem']);
  });

  it('the image keeps the embedded database in a volume, declared after the folder is given to its user', () => {
    const lines = read('Dockerfile').split('\n');
    const finalStage = lines.slice(lines.findLastIndex((l) => l.startsWith('FROM ')));
    expect(finalStage.join('\n')).toMatch(/^ENV [\s\S]*DATA_DIR=\/app\/data/m);
    const chown = finalStage.findIndex((l) => /chown node:node \/app\/data/.test(l));
    const volume = finalStage.findIndex((l) => /^VOLUME \[?"?\/app\/data"?\]?$/.test(l));
    expect(chown).toBeGreaterThanOrEqual(0);
    expect(volume).toBeGreaterThan(chown);
  });

  it('compose refuses an empty or missing POSTGRES_PASSWORD before any container starts', () => {
    expect(read('docker-compose.yml')).toMatch(/^x-[a-z-]+: "\$\{POSTGRES_PASSWORD:\?[^}]+\}"$/m);
  });

  it('no README example puts a station password on the command line', () => {
    const stationCommands = read('README.md')
      .split('\n')
      .filter((l) => /cli(?:\.js)? -* ?station\b/.test(l));
    expect(stationCommands.length).toBeGreaterThan(0);
    for (const line of stationCommands) expect(line).not.toMatch(/--password/);
  });
});
