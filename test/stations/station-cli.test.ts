// `cli station`: a station played from the command line against a running service.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runStationCommand } from '../../src/stations/station-cli.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { provisionStation } from '../helpers/station-factory.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';


let t: TestApp;
let url: string;

beforeAll(async () => {
  t = await createTestApp({ passwordHashParams: CHEAP_HASH, env: { OCPP_MIN_SECURITY_PROFILE: '1' } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  url = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/ocpp`;
});
afterAll(async () => {
  await t.close();
});

async function readStation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  return res.json().data.station;
}

describe('cli station', () => {
  it.each(['2.0.1', '1.6'] as const)('OCPP %s: connects, boots, heartbeats, prints what it is asked (never a password) and comes online in the asset read', async (ocppVersion) => {
    const s = await provisionStation(t, { ocppVersion });
    const lines: string[] = [];
    const run = runStationCommand(['--url', url, '--id', s.id, '--password', s.password, '--ocpp', ocppVersion, '--heartbeat', '1', '--heartbeats', '2'], (l) =>
      lines.push(l),
    );
    await vi.waitFor(() => expect(lines.some((l) => l.startsWith('-> Heartbeat'))).toBe(true));
    expect(lines[0]).toBe(`connected to ${url}/${s.id} (ocpp${ocppVersion})`);
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
    expect(await runStationCommand(['--url', url, '--id', s.id, '--password', s.password, '--heartbeat', '1', '--heartbeats', '1'], (l) => lines.push(l))).toBe(0);
    expect(lines[0]).toBe(`connected to ${url}/${s.id} (ocpp2.0.1)`);
  });

  it('a refused login says why it may have been refused, without a password', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    await expect(runStationCommand(['--url', url, '--id', s.id, '--password', 'Wrong-password-1234'], () => undefined)).rejects.toThrow(/HTTP 401/);
    await expect(runStationCommand(['--url', url, '--id', 'CP-nobody', '--password', 'Wrong-password-1234'], () => undefined)).rejects.toThrow(/HTTP 404/);
  });
});
