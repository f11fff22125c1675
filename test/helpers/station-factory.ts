import { request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { RPCClient } from 'ocpp-rpc';
import { subprotocolOf, type OcppVersion } from '../../src/kernel/ocpp-vocabulary.js';
import { createTestApp, type TestApp, type TestAppOptions } from './test-app.js';
import { ASSET_WRITER, createAsset } from './asset-factory.js';
import { CHEAP_HASH } from './password-hash-params.js';

export interface ProvisionedStation {
  id: string;
  network: string;
  ocppVersion: OcppVersion;
  // The password as the API took it (1.6: hex text).
  password: string;
}

// An asset with a password set through the API, as an operator provisions a station.
export async function provisionStation(
  t: TestApp,
  body: { ocppVersion?: OcppVersion; securityProfile?: number; password?: string } = {},
): Promise<ProvisionedStation> {
  const asset = await createAsset(t, { ocppVersion: body.ocppVersion ?? '2.0.1', securityProfile: body.securityProfile ?? 1 });
  const res = await t.app.inject({
    method: 'POST',
    url: '/asset-management/v1/assets/change-password',
    headers: { authorization: t.bearer(ASSET_WRITER) },
    payload: { id: asset.id, ...(body.password !== undefined ? { password: body.password } : {}) },
  });
  expect(res.statusCode, res.body).toBe(200);
  return { id: asset.id, network: asset.network, ocppVersion: asset.ocppVersion, password: body.password ?? res.json().data.password };
}

export interface StationOptions {
  identity: string;
  password?: string | Buffer | undefined;
  protocols: string[];
  headers?: Record<string, string>;
  strictMode?: boolean;
  wsOpts?: Record<string, unknown>;
}

// A real third-party OCPP-J client plays the station.
export function stationClient(endpoint: string, options: StationOptions) {
  return new RPCClient({
    endpoint,
    identity: options.identity,
    // The library sends a Buffer as raw bytes; its typings say string.
    ...(options.password !== undefined ? { password: options.password as string } : {}),
    protocols: options.protocols,
    headers: options.headers ?? {},
    strictMode: options.strictMode ?? true,
    reconnect: false,
    ...(options.wsOpts ? { wsOpts: options.wsOpts } : {}),
  } as never);
}

export type StationClient = ReturnType<typeof stationClient>;

// The HTTP status a refused upgrade got.
export async function refusedWith(client: StationClient): Promise<number> {
  const error = (await client.connect().then(
    () => {
      throw new Error('the station was let in');
    },
    (e: unknown) => e,
  )) as { code?: number };
  return error.code ?? -1;
}

export function basic(user: string, password: string | Buffer): string {
  return `Basic ${Buffer.concat([Buffer.from(`${user}:`), Buffer.isBuffer(password) ? password : Buffer.from(password)]).toString('base64')}`;
}

// A WebSocket handshake written by hand, for what no client library lets a test control: the
// extensions offered, and never answering a ping.
export function rawUpgrade(
  port: number,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; socket: Socket | null }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        ...headers,
      },
    });
    req.on('upgrade', (res, socket) => resolve({ status: res.statusCode ?? 0, headers: res.headers, socket }));
    req.on('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, headers: res.headers, socket: null });
    });
    req.on('error', reject);
    req.end();
  });
}

export interface StationApp extends TestApp {
  port: number;
  // ws://127.0.0.1:<port>/ocpp
  endpoint: string;
  // Station clients to close, before the app, after the file's last test.
  open: StationClient[];
}

// The app of one station test file, listening on a free port for stations, built before its first
// test and closed after its last; like useTestApp, the returned object stands for it from beforeAll
// on. Plain ws:// (profile 1) and cheap hashes unless the options say otherwise.
export function useStationApp(options: TestAppOptions = {}): StationApp {
  let current: StationApp | undefined;
  beforeAll(async () => {
    const t = await createTestApp({
      captureLogs: true,
      passwordHashParams: CHEAP_HASH,
      ...options,
      env: { OCPP_MIN_SECURITY_PROFILE: '1', ...options.env },
    });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (t.app.server.address() as AddressInfo).port;
    current = { ...t, port, endpoint: `ws://127.0.0.1:${port}/ocpp`, open: [] };
  });
  afterAll(async () => {
    await Promise.all((current?.open ?? []).map((c) => c.close({ force: true }).catch(() => undefined)));
    await current?.close();
  });
  return new Proxy({} as StationApp, {
    get(_target, property) {
      if (!current) throw new Error('the station app exists from beforeAll on');
      return Reflect.get(current, property) as unknown;
    },
  });
}

// The call that carries a new password to a station of the version.
export const PASSWORD_COMMAND = { '1.6': 'ChangeConfiguration', '2.0.1': 'SetVariables' } as const;

// What a station sends as its Basic Auth password: 1.6 the key's raw bytes (OCPP-J 1.6 §6.2.2).
export function wirePassword(version: OcppVersion, password: string): string | Buffer {
  return version === '1.6' ? Buffer.from(password, 'hex') : password;
}

// A station's answer to the password command with this status, in its version's shape.
export function passwordCommandAnswer(version: OcppVersion, status: string, params: unknown): Record<string, unknown> {
  if (version === '1.6') return { status };
  const data = (params as { setVariableData: Array<{ component: unknown; variable: unknown }> }).setVariableData[0]!;
  return { setVariableResult: [{ attributeStatus: status, component: data.component, variable: data.variable }] };
}

// A station of the version logging in with this password: 101 when let in (the socket is closed
// again at once), otherwise the HTTP status of the refused upgrade.
export async function loginStatus(endpoint: string, station: { id: string; version: OcppVersion; password: string }): Promise<number> {
  const client = stationClient(endpoint, { identity: station.id, password: wirePassword(station.version, station.password), protocols: [subprotocolOf(station.version)] });
  const status = await client.connect().then(
    () => 101,
    (e: { code?: number }) => e.code ?? -1,
  );
  if (status === 101) await client.close({ force: true });
  return status;
}
