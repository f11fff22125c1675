import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import { createStationConnections, type StationConnections } from './station-connections.js';
import type { LoginLimits } from './login-gate.js';

declare module 'fastify' {
  interface FastifyInstance {
    stations: StationConnections;
  }
}

// The OCPP-J endpoint on the service's own HTTP server. buildApp never listens,
// but the http.Server exists on the instance, so its upgrades are wired here; a TLS listener
// (main/listeners.ts) hands its upgrades to the same `app.stations.handleUpgrade`.
async function stationsPlugin(app: FastifyInstance, opts: { loginLimits?: Partial<LoginLimits> | undefined; clock?: (() => Date) | undefined }): Promise<void> {
  const { config, database } = app;
  const replacedLogins = new Counter({
    name: 'ocpp_replaced_password_logins_total',
    help: 'Station logins refused because they used the password the latest rotation replaced (the station acknowledged a change it did not apply)',
    registers: [app.metrics],
  });
  const throttledLogins = new Counter({
    name: 'ocpp_logins_throttled_total',
    help: 'Station logins refused with 429 before the upgrade because their address had too many refused logins',
    registers: [app.metrics],
  });
  const hashTimeouts = new Counter({
    name: 'ocpp_login_hash_timeouts_total',
    help: 'Station logins refused with 503 before the upgrade because no password check was free within the wait bound',
    registers: [app.metrics],
  });
  const stations = createStationConnections({
    db: database.db,
    log: app.log.child({ component: 'stations' }),
    heartbeatIntervalSeconds: config.ocpp.heartbeatIntervalSeconds,
    pingIntervalSeconds: config.ocpp.pingIntervalSeconds,
    leaseSeconds: config.ocpp.leaseSeconds,
    minSecurityProfile: config.ocppMinSecurityProfile,
    trustProxy: config.trustProxy,
    databasePoolMax: config.database.poolMax,
    connectionString: database.connectionString,
    onReplacedLogin: () => replacedLogins.inc(),
    onLoginThrottled: () => throttledLogins.inc(),
    onLoginHashTimeout: () => hashTimeouts.inc(),
    loginLimits: opts.loginLimits,
    ...(opts.clock ? { loginClock: () => opts.clock!().getTime() } : {}),
  });
  new Gauge({
    name: 'ocpp_login_hash_queue_waiting',
    help: 'Station logins waiting for a slow password hash',
    registers: [app.metrics],
    collect() {
      this.set(stations.loginQueue.waiting);
    },
  });
  await stations.start();
  app.decorate('stations', stations);
  app.server.on('upgrade', stations.handleUpgrade);
  // Before the HTTP server closes (it would wait for the upgraded sockets) and while the database
  // is still open: close the sockets and mark this replica's stations disconnected.
  app.addHook('preClose', async () => {
    app.server.off('upgrade', stations.handleUpgrade);
    await stations.close();
  });
}

// Its start writes this replica's lease (the database migrated first) and it counts into the
// app's metrics registry. `database` and `config` are buildApp's own, decorated before any plugin.
export default fp(stationsPlugin, { name: 'stations', dependencies: ['database', 'observability'], decorators: { fastify: ['database', 'config'] } });
