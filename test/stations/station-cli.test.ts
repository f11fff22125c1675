// `cli station`: a station played from the command line against a running service.
import { describe, expect, it, vi } from 'vitest';
import { runStationCommand } from '../../src/stations/station-cli.js';
import { provisionStation, useStationApp } from '../helpers/station-factory.js';

const t = useStationApp();

async function readStation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  return res.json().data.station;
}

describe('cli station', () => {
  it.each(['2.0.1', '1.6'] as const)('OCPP %s: connects, boots, heartbeats, prints what it is asked (never a password) and comes online in the asset read', async (ocppVersion) => {
    const s = await provisionStation(t, { ocppVersion });
    const lines: string[] = [];
    const run = runStationCommand(['--url', t.endpoint, '--id', s.id, '--password', s.password, '--ocpp', ocppVersion, '--heartbeat', '1', '--heartbeats', '2'], (l) =>
      lines.push(l),
    );
    await vi.waitFor(() => expect(lines.some((l) => l.startsWith('-> Heartbeat'))).toBe(true));
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
    await vi.waitFor(async () => expect((await readStation(s.id)).connected).toBe(false));
  });

  it('takes a password that starts with "-" (a generated 2.0.1 password may) as the value of --password', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1', password: '-starts-with-a-dash-1234' });
    const lines: string[] = [];
    expect(await runStationCommand(['--url', t.endpoint, '--id', s.id, '--password', s.password, '--heartbeat', '1', '--heartbeats', '1'], (l) => lines.push(l))).toBe(0);
    expect(lines[0]).toBe(`connected to ${t.endpoint}/${s.id} (ocpp2.0.1)`);
  });

  it('a refused login says why it may have been refused, without a password', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    await expect(runStationCommand(['--url', t.endpoint, '--id', s.id, '--password', 'Wrong-password-1234'], () => undefined)).rejects.toThrow(/HTTP 401/);
    await expect(runStationCommand(['--url', t.endpoint, '--id', 'CP-nobody', '--password', 'Wrong-password-1234'], () => undefined)).rejects.toThrow(/HTTP 404/);
  });
});
