// `cli station`: a station played from the command line against a running service.
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runStationCommand, STATION_USAGE } from '../../../src/main/cli/station-command.js';
import { eventually } from '../../helpers/eventually.js';
import { provisionStation, useStationApp } from '../../helpers/station-factory.js';

const t = useStationApp();

async function readStation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  return res.json().data.station;
}

describe('cli station', () => {
  it.each(['2.0.1', '1.6'] as const)('OCPP %s: connects, boots, heartbeats, prints what it is asked (never a password) and comes online in the asset read', async (ocppVersion) => {
    const s = await provisionStation(t, { ocppVersion });
    const lines: string[] = [];
    const run = runStationCommand(
      ['--url', t.endpoint, '--id', s.id, '--ocpp', ocppVersion, '--heartbeat', '1', '--heartbeats', '2'],
      (l) => lines.push(l),
      { env: { STATION_PASSWORD: s.password } },
    );
    await eventually(() => expect(lines.some((l) => l.startsWith('-> Heartbeat'))).toBe(true));
    expect(lines[0]).toBe(`connected to ${t.endpoint}/${s.id} (ocpp${ocppVersion})`);
    expect(lines[1]).toMatch(/^-> BootNotification: \{"status":"Accepted","currentTime":".+","interval":300\}$/);
    expect(await readStation(s.id)).toMatchObject({ connected: true, vendor: 'cns', model: 'cli-station', firmwareVersion: '1.0.0' });

    const secret = 'New-Secret-Password-123456';
    const command =
      ocppVersion === '1.6'
        ? ['ChangeConfiguration', { key: 'AuthorizationKey', value: secret }]
        : ['SetVariables', { setVariableData: [{ attributeValue: secret, component: { name: 'SecurityCtrlr' }, variable: { name: 'BasicAuthPassword' } }] }];
    await expect(t.app.stations.call(s.id, command[0] as string, command[1], 5000)).rejects.toMatchObject({ code: 'NotImplemented' });
    expect(lines.some((l) => l.startsWith(`<- ${command[0] as string}`))).toBe(true);
    expect(lines.join('\n')).not.toContain(secret);
    expect(lines.join('\n')).not.toContain(s.password);

    expect(await run).toBe(0);
    await eventually(async () => expect((await readStation(s.id)).connected).toBe(false));
  });

  it('reads the password from standard input when STATION_PASSWORD is unset, a leading "-" included', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1', password: '-starts-with-a-dash-1234' });
    const lines: string[] = [];
    const stdin = Readable.from([`${s.password}\n`]);
    expect(await runStationCommand(['--url', t.endpoint, '--id', s.id, '--heartbeat', '1', '--heartbeats', '1'], (l) => lines.push(l), { env: {}, stdin })).toBe(0);
    expect(lines[0]).toBe(`connected to ${t.endpoint}/${s.id} (ocpp2.0.1)`);
  });

  it('asks for the password on a terminal without echoing it', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const terminal = Object.assign(new PassThrough(), { isTTY: true });
    const prompt = new PassThrough();
    let shown = '';
    prompt.on('data', (chunk: Buffer) => (shown += chunk.toString()));
    const run = runStationCommand(['--url', t.endpoint, '--id', s.id, '--heartbeat', '1', '--heartbeats', '1'], () => undefined, { env: {}, stdin: terminal, prompt });
    await eventually(() => expect(shown).toContain('station password: '));
    terminal.write(`${s.password}\r`);
    expect(await run).toBe(0);
    expect(shown).not.toContain(s.password);
  });

  it('refuses a password on the command line, and says why and what to use instead', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    for (const args of [['--password', s.password], [`--password=${s.password}`]]) {
      await expect(runStationCommand(['--url', t.endpoint, '--id', s.id, ...args], () => undefined, { env: {} })).rejects.toThrow(
        /--password is not accepted: .*seen by every user.*STATION_PASSWORD.*standard input/,
      );
    }
    await expect(runStationCommand(['--url', t.endpoint, '--id', s.id], () => undefined, { env: {}, stdin: Readable.from([]) })).rejects.toThrow(
      /no password: set STATION_PASSWORD, or give the password on standard input/,
    );
    expect(STATION_USAGE).not.toMatch(/--password/);
    expect(STATION_USAGE).toMatch(/STATION_PASSWORD[\s\S]*standard input[\s\S]*never from the command line/);
  });

  it('a refused login says why it may have been refused, without a password', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const wrong = { env: { STATION_PASSWORD: 'Wrong-password-1234' } };
    await expect(runStationCommand(['--url', t.endpoint, '--id', s.id], () => undefined, wrong)).rejects.toThrow(/HTTP 401/);
    await expect(runStationCommand(['--url', t.endpoint, '--id', 'CP-nobody'], () => undefined, wrong)).rejects.toThrow(/HTTP 404/);
  });
});
