// Several replicas behind HAProxy, as operators run them: Debian's haproxy with the repository's
// deploy/haproxy/haproxy.cfg (only the listening addresses, the replicas' addresses and the
// certificate's path replaced) in front of three real service processes on one PostgreSQL
// database. vitest.config.ts leaves this file out of runs without DATABASE_URL; without haproxy
// it fails.
import { Agent, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { RPCClient } from 'ocpp-rpc';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startBalancer, type Balancer } from '../helpers/haproxy.js';
import { paymentBody } from '../helpers/payments-factory.js';
import { freePort } from '../helpers/probe-app.js';
import { bootstrapToken, killProcess, startProcess, waitUntilHealthy, type ProcessResult } from '../helpers/service-process.js';
import { refusedWith, stationClient, type StationClient } from '../helpers/station-factory.js';
import { createServerDatabase } from '../helpers/test-database.js';

const REPLICAS = 3;
const NETWORK = 'net_balancer';
// Stations that stay connected (reconnecting, as real ones do) through the kill and the restarts.
const STATIONS = 9;
const LIST_CLIENTS = 16;

interface Replica {
  name: string;
  port: number;
  base: string;
  process: ReturnType<typeof startProcess>;
}

interface HttpAnswer {
  status: number;
  body: string;
}

function httpGet(url: string, headers: Record<string, string>, agent: Agent): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function httpsGet(url: string, headers: Record<string, string>, ca: Buffer): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ca, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

// A station as it runs in the field: it reconnects after every close it did not ask for.
interface FieldStation {
  id: string;
  client: InstanceType<typeof RPCClient>;
  opens: number[];
  disconnects: { at: number; code: number }[];
}

describe('three replicas behind HAProxy on one database (PostgreSQL + HAProxy)', () => {
  let database: Awaited<ReturnType<typeof createServerDatabase>>;
  let lb: Balancer;
  const replicas: Replica[] = [];
  let token: string;
  const fieldStations: FieldStation[] = [];
  const others: StationClient[] = [];

  function replicaEnv(port: number): Record<string, string> {
    return {
      ...database.env,
      PORT: String(port),
      LOG_LEVEL: 'error',
      RATE_LIMIT_MAX: '0',
      DATABASE_POOL_MAX: '5',
      // The balancer sets X-Forwarded-For and X-Forwarded-Proto; the replicas take them.
      TRUST_PROXY: 'true',
      // One issuer, as behind one address: a token of one replica is good at every other.
      AUTH_ISSUER: 'http://cns.test',
      OCPP_MIN_SECURITY_PROFILE: '1',
    };
  }

  async function startReplica(name: string, port: number): Promise<Replica> {
    const process = startProcess(['src/server.ts'], replicaEnv(port));
    const base = `http://127.0.0.1:${port}`;
    await waitUntilHealthy(async () => (await fetch(`${base}/readyz`)).status, process.child);
    return { name, port, base, process };
  }

  async function api(path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${lb.base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  async function provision(id: string, securityProfile: 1 | 2): Promise<string> {
    const created = await api('/asset-management/v1/assets', { id, network: NETWORK, securityProfile });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const changed = await api('/asset-management/v1/assets/change-password', { id });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    return (changed.body.data as { password: string }).password;
  }

  async function stationView(id: string): Promise<Record<string, unknown> | null> {
    const res = await api(`/asset-management/v1/assets/${id}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body.data as { station: Record<string, unknown> | null }).station;
  }

  const boot = (serialNumber: string) => ({ reason: 'PowerUp', chargingStation: { vendorName: 'Alpitronic', model: 'HYC300', serialNumber } });

  // Connections each replica holds in the balancer's stations backend.
  async function stationsPerReplica(): Promise<number[]> {
    const states = await lb.servers();
    return replicas.map((r) => states.get(`stations/${r.name}`)?.current ?? -1);
  }

  async function listAll(sessions: string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (let i = 0; i < sessions.length; i += 100) {
      const chunk = sessions.slice(i, i + 100);
      const res = await fetch(`${lb.base}/payments/v1/session-payments?sessionIds=${chunk.join(',')}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      for (const payment of (await res.json()) as { session: string }[]) found.add(payment.session);
    }
    return found;
  }

  beforeAll(async () => {
    database = await createServerDatabase();
    const ports = await Promise.all(Array.from({ length: REPLICAS }, () => freePort()));
    // The first creates the bootstrap client; the others start beside each other.
    replicas.push(await startReplica('api1', ports[0]!));
    ({ token } = await bootstrapToken({ base: replicas[0]!.base, child: replicas[0]!.process.child, output: replicas[0]!.process.output }));
    replicas.push(...(await Promise.all(ports.slice(1).map((port, i) => startReplica(`api${i + 2}`, port)))));
    lb = await startBalancer(ports);
    await lb.waitFor(
      replicas.map((r) => `api/${r.name}`),
      'UP',
    );
  }, 240_000);

  afterAll(async () => {
    await Promise.all([...fieldStations.map((s) => s.client), ...others].map((c) => c.close({ force: true }).catch(() => undefined)));
    await Promise.all(replicas.map((r) => killProcess(r.process.child)));
    await lb?.stop();
    await database?.drop();
  });

  it('serves the API and the stations on one address, over http and https, ws:// and wss://, the stations spread over the replicas (PostgreSQL + HAProxy)', async () => {
    const body = paymentBody({ network: NETWORK });
    expect((await api('/payments/v1/session-payments', body)).status).toBe(201);
    const overTls = await httpsGet(`${lb.httpsBase}/payments/v1/session-payments?sessionIds=${body.session}`, { authorization: `Bearer ${token}` }, lb.ca);
    expect(overTls.status, overTls.body).toBe(200);
    expect((JSON.parse(overTls.body) as { session: string }[]).map((p) => p.session)).toEqual([body.session]);

    for (let i = 1; i <= STATIONS; i++) {
      const id = `CP-lb-${i}`;
      const password = await provision(id, 1);
      const station: FieldStation = {
        id,
        client: new RPCClient({ endpoint: lb.wsEndpoint, identity: id, password, protocols: ['ocpp2.0.1'], strictMode: true, reconnect: true } as never),
        opens: [],
        disconnects: [],
      };
      station.client.on('open', () => station.opens.push(Date.now()));
      station.client.on('disconnect', ({ code }: { code: number }) => station.disconnects.push({ at: Date.now(), code }));
      fieldStations.push(station);
      await station.client.connect();
      expect(await station.client.call('BootNotification', boot(`SN-${id}`))).toMatchObject({ status: 'Accepted' });
    }
    for (const s of fieldStations) expect(await stationView(s.id)).toMatchObject({ connected: true, protocol: 'ocpp2.0.1', serialNumber: `SN-${s.id}` });
    // Each new connection goes to the replica holding the fewest: three each.
    await vi.waitFor(async () => expect(await stationsPerReplica()).toEqual([3, 3, 3]), { timeout: 5000 });

    // Security profile 2 over the balancer's TLS: the replica accepts it on X-Forwarded-Proto.
    const id = 'CP-lb-tls';
    const password = await provision(id, 2);
    const secure = stationClient(lb.wssEndpoint, { identity: id, password, protocols: ['ocpp2.0.1'], wsOpts: { ca: lb.ca } });
    others.push(secure);
    await secure.connect();
    expect(await secure.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
    expect(await stationView(id)).toMatchObject({ connected: true });
    await secure.close({ code: 1000 });
    // Over plain ws:// it is refused, even with the header written by the station itself (the
    // balancer replaces it).
    for (const headers of [{}, { 'x-forwarded-proto': 'https' }] as Record<string, string>[]) {
      const plain = stationClient(lb.wsEndpoint, { identity: id, password, protocols: ['ocpp2.0.1'], headers });
      expect(await refusedWith(plain)).toBe(401);
    }
  });

  it('throttles refused station logins by the station’s own address, which a station cannot choose: others behind the same balancer still log in (PostgreSQL + HAProxy)', async () => {
    const throttledOn = async () =>
      Promise.all(
        replicas.map(async (r) => {
          const metrics = await (await fetch(`${r.base}/metrics`)).text();
          return Number(/^ocpp_logins_throttled_total (\d+)/m.exec(metrics)?.[1] ?? 0);
        }),
      );
    const before = await throttledOn();
    // Unknown identities from 127.0.0.3, each naming another X-Forwarded-For: every replica counts
    // them against 127.0.0.3 (the balancer's X-Forwarded-For) until it throttles that address.
    const statuses: number[] = [];
    for (let i = 0; i < 400; i++) {
      const guesser = stationClient(lb.wsEndpoint, {
        identity: `CP-lb-unknown-${i}`,
        password: 'not-a-password-at-all',
        protocols: ['ocpp2.0.1'],
        headers: { 'x-forwarded-for': `198.51.100.${i % 250}` },
        wsOpts: { localAddress: '127.0.0.3' },
      });
      statuses.push(await refusedWith(guesser));
      if (i % 10 === 9 && (await throttledOn()).every((n, r) => n > before[r]!)) break;
    }
    expect((await throttledOn()).map((n, r) => n > before[r]!)).toEqual(replicas.map(() => true));
    expect(new Set(statuses)).toEqual(new Set([404, 429]));
    // Stations from another address, through the same balancer and so on every replica, are not
    // held back by them.
    const password = await provision('CP-lb-neighbour', 1);
    for (let i = 0; i < REPLICAS; i++) {
      const neighbour = stationClient(lb.wsEndpoint, { identity: 'CP-lb-neighbour', password, protocols: ['ocpp2.0.1'] });
      others.push(neighbour);
      await neighbour.connect();
      expect(await neighbour.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
      await neighbour.close({ code: 1000 });
    }
  });

  it('kill -9 of one replica: its stations reconnect through the balancer and read connected within 10 s of their reconnect; nothing acknowledged is lost (PostgreSQL + HAProxy)', async () => {
    const victim = replicas[1]!;
    const onVictim = (await stationsPerReplica())[1]!;
    expect(onVictim).toBeGreaterThan(0);
    // Acknowledged just before the kill: each station's boot, and the payments written meanwhile.
    for (const s of fieldStations) expect(await s.client.call('BootNotification', boot(`SN-${s.id}-before-kill`))).toMatchObject({ status: 'Accepted' });
    const acknowledged: string[] = [];
    const unanswered: string[] = [];
    let writing = true;
    const writers = Array.from({ length: 4 }, async () => {
      while (writing) {
        const body = paymentBody({ network: NETWORK });
        try {
          const res = await fetch(`${lb.base}/payments/v1/session-payments`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          if (res.status === 201) acknowledged.push(body.session);
          else unanswered.push(`${res.status}`);
          await res.arrayBuffer();
        } catch (error) {
          unanswered.push(String(error));
        }
      }
    });
    await sleep(500);

    const killedAt = Date.now();
    victim.process.child.kill('SIGKILL');
    await victim.process.exited;
    // The stations it held lose their sockets and reconnect on their own (ocpp-rpc's back-off).
    const moved = () => fieldStations.filter((s) => s.disconnects.some((d) => d.at >= killedAt));
    await vi.waitFor(() => expect(moved()).toHaveLength(onVictim), { timeout: 15_000 });
    const readings = await Promise.all(
      moved().map(async (s) => {
        await vi.waitFor(() => expect(s.opens.some((at) => at > killedAt)).toBe(true), { timeout: 30_000, interval: 50 });
        const reconnectedAt = s.opens.find((at) => at > killedAt)!;
        // The contract's bound, from the reconnect on.
        await vi.waitFor(async () => expect(await stationView(s.id)).toMatchObject({ connected: true }), {
          timeout: 10_000 - (Date.now() - reconnectedAt),
          interval: 100,
        });
        return { reconnectMs: reconnectedAt - killedAt, connectedMs: Date.now() - reconnectedAt };
      }),
    );
    writing = false;
    await Promise.all(writers);
    console.log(
      `kill -9 of ${victim.name}: ${readings.length} stations; reconnected ${readings.map((r) => r.reconnectMs).join(', ')} ms after the kill, read connected ${readings.map((r) => r.connectedMs).join(', ')} ms after their reconnect; ${acknowledged.length} payments acknowledged meanwhile, ${unanswered.length} not (${[...new Set(unanswered)].join(', ')})`,
    );

    // Nothing acknowledged is lost: every payment answered 201, every station's last boot.
    expect(acknowledged.length).toBeGreaterThan(0);
    const stored = await listAll(acknowledged);
    expect(acknowledged.filter((session) => !stored.has(session))).toEqual([]);
    for (const s of fieldStations) expect(await stationView(s.id)).toMatchObject({ connected: true, serialNumber: `SN-${s.id}-before-kill` });

    // Back on its address for the next test.
    replicas[1] = await startReplica(victim.name, victim.port);
    await lb.waitFor([`api/${victim.name}`], 'UP');
  }, 180_000);

  it(`a rolling restart of every replica (SIGTERM, wait, start again) under list load from ${LIST_CLIENTS} clients: no failed request, and the stations end connected (PostgreSQL + HAProxy)`, async () => {
    const sessions: string[] = [];
    for (let i = 0; i < 5; i++) {
      const body = paymentBody({ network: NETWORK });
      expect((await api('/payments/v1/session-payments', body)).status).toBe(201);
      sessions.push(body.session);
    }
    const listUrl = `${lb.base}/payments/v1/session-payments?sessionIds=${sessions.join(',')}`;
    const load = { ok: 0, failures: [] as string[], running: true };
    // Each client on its own kept-alive connection, one request after another.
    const clients = Array.from({ length: LIST_CLIENTS }, async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        while (load.running) {
          try {
            const res = await httpGet(listUrl, { authorization: `Bearer ${token}` }, agent);
            if (res.status === 200 && (JSON.parse(res.body) as unknown[]).length === sessions.length) load.ok += 1;
            else load.failures.push(`${res.status} ${res.body.slice(0, 200)}`);
          } catch (error) {
            load.failures.push(String(error));
          }
        }
      } finally {
        agent.destroy();
      }
    });

    const stops: { name: string; exit: ProcessResult; exitMs: number; downMs: number }[] = [];
    await sleep(1000);
    for (let i = 0; i < replicas.length; i++) {
      const replica = replicas[i]!;
      const signalledAt = Date.now();
      replica.process.child.kill('SIGTERM');
      await lb.waitFor([`api/${replica.name}`], 'DOWN', 10_000);
      const downMs = Date.now() - signalledAt;
      const exit = await replica.process.exited;
      stops.push({ name: replica.name, exit, exitMs: Date.now() - signalledAt, downMs });
      replicas[i] = await startReplica(replica.name, replica.port);
      await lb.waitFor([`api/${replica.name}`], 'UP');
    }
    await sleep(1000);
    load.running = false;
    await Promise.all(clients);

    const moves = fieldStations.map((s) => s.disconnects.filter((d) => d.code === 1012).length);
    console.log(
      `rolling restart: ${load.ok} list requests answered 200, ${load.failures.length} failed; ${stops
        .map((s) => `${s.name} out of the balancer ${s.downMs} ms and exited (${s.exit.code}) ${s.exitMs} ms after SIGTERM`)
        .join('; ')}; the stations were asked to move ${moves.reduce((a, b) => a + b, 0)} times`,
    );
    expect(load.failures).toEqual([]);
    expect(load.ok).toBeGreaterThan(0);
    for (const stop of stops) expect({ name: stop.name, code: stop.exit.code, signal: stop.exit.signal, stderr: stop.exit.stderr }).toEqual({ name: stop.name, code: 0, signal: null, stderr: '' });
    // Every station was on some replica that stopped, and was closed with 1012 (reconnect).
    expect(moves.every((n) => n >= 1)).toBe(true);
    for (const s of fieldStations) {
      await vi.waitFor(async () => expect(await stationView(s.id)).toMatchObject({ connected: true }), { timeout: 15_000, interval: 200 });
      expect(await s.client.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
    }
  }, 300_000);
});
