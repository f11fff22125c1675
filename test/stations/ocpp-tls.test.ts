// Security profile 2 over the service's own TLS listener (OCPP_TLS_PORT, docs/stations.md), with a
// certificate made for the test. node:crypto cannot write X.509 certificates and no JavaScript
// library for it is installed, so the machine's openssl command makes it.
import { rmSync } from 'node:fs';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOcppTls, type OcppTlsListener } from '../../src/main/listeners.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { createAsset } from '../helpers/asset-factory.js';
import { provisionStation, refusedWith, stationClient } from '../helpers/station-factory.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';
import { selfSignedCertificate } from '../helpers/tls-certificate.js';


let t: TestApp;
let tls: OcppTlsListener;
let dir: string;
let ca: Buffer;
let plain: string;
let secure: string;

beforeAll(async () => {
  let certFile: string, keyFile: string;
  ({ dir, certFile, keyFile, ca } = selfSignedCertificate('ocpp-tls-'));
  // The default minimum profile, 2.
  t = await createTestApp({ passwordHashParams: CHEAP_HASH });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  tls = await listenOcppTls(t.app, { host: '127.0.0.1', port: 0, certFile, keyFile, requestTimeoutMs: 5000, backlog: 511 });
  plain = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/ocpp`;
  secure = `wss://127.0.0.1:${tls.port}/ocpp`;
});
afterAll(async () => {
  await t.close();
  await tls.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('security profile 2 (Basic Auth over TLS)', () => {
  it.each(['2.0.1', '1.6'] as const)('an OCPP %s station logs in over wss:// and is refused (401) over ws://', async (ocppVersion) => {
    const s = await provisionStation(t, { ocppVersion, securityProfile: 2 });
    const password = ocppVersion === '1.6' ? Buffer.from(s.password, 'hex') : s.password;
    const protocols = [ocppVersion === '1.6' ? 'ocpp1.6' : 'ocpp2.0.1'];
    expect(await refusedWith(stationClient(plain, { identity: s.id, password, protocols }))).toBe(401);

    const station = stationClient(secure, { identity: s.id, password, protocols, wsOpts: { ca } });
    await station.connect();
    try {
      expect(await station.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
      const read = await t.app.inject({ url: `/asset-management/v1/assets/${s.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
      expect(read.json().data.station).toMatchObject({ connected: true, protocol: protocols[0] });
    } finally {
      await station.close({ force: true });
    }
  });

  it('checks the credentials on the TLS port too, and profile 3 is refused there', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1', securityProfile: 2 });
    expect(await refusedWith(stationClient(secure, { identity: s.id, password: `${s.password}x`, protocols: ['ocpp2.0.1'], wsOpts: { ca } }))).toBe(401);
    expect(await refusedWith(stationClient(secure, { identity: 'CP-unknown-tls', password: s.password, protocols: ['ocpp2.0.1'], wsOpts: { ca } }))).toBe(404);
    const p3 = await createAsset(t, { securityProfile: 3 });
    expect(await refusedWith(stationClient(secure, { identity: p3.id, password: s.password, protocols: ['ocpp2.0.1'], wsOpts: { ca } }))).toBe(401);
  });

  it('serves nothing but the OCPP upgrade', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port: tls.port, path: '/asset-management/v1/assets', ca }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(404);
  });
});
