import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter } from 'prom-client';
import { createStationConnections, type StationConnections } from './station-connections.js';

declare module 'fastify' {
  interface FastifyInstance {
    stations: StationConnections;
  }
}

// The OCPP-J endpoint on the service's own HTTP server (contract §8.1). buildApp never listens,
// but the http.Server exists on the instance, so its upgrades are wired here; a TLS listener
// (lifecycle.ts) hands its upgrades to the same `app.stations.handleUpgrade`.
async function stationsPlugin(app: FastifyInstance): Promise<void> {
  const { config, database } = app.services;
  const replacedLogins = new Counter({
    name: 'ocpp_replaced_password_logins_total',
    help: 'Station logins refused because they used the password the latest rotation replaced (the station acknowledged a change it did not apply)',
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

export default fp(stationsPlugin, { name: 'stations' });
