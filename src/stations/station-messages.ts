// The OCPP actions a station may send that the service handles, in any version: its codec reads
// them (ocpp-codec.ts). Every other action gets the library's NotImplemented.
import type { FastifyBaseLogger } from 'fastify';
import type { OcppCodec } from './ocpp/ocpp-codec.js';
import type { ClaimedSocket } from './socket-registry.js';
import { MAX_CONNECTOR_STATUSES } from './station-bounds.js';
import type { StationStatements } from './station-statements.js';

export interface StationMessageOptions {
  log: FastifyBaseLogger;
  statements: StationStatements;
  heartbeatIntervalSeconds: number;
}

// The handlers of the socket of the claim at `epoch`: what they store is guarded by it.
export function handleStationMessages(socket: ClaimedSocket, epoch: number, codec: OcppCodec, options: StationMessageOptions): void {
  const { log, statements } = options;
  const assetId = socket.identity;
  socket.handle('BootNotification', async (request) => {
    // Stored before the answer goes out, so a read right after the answer shows it.
    await statements.boot({ assetId, epoch, ...codec.readBoot(request) });
    return { status: 'Accepted', currentTime: new Date().toISOString(), interval: options.heartbeatIntervalSeconds };
  });
  socket.handle('Heartbeat', () => ({ currentTime: new Date().toISOString() }));
  socket.handle('StatusNotification', async (request) => {
    const { key, status } = codec.readConnectorStatus(request, new Date().toISOString());
    if ((await statements.connectorStatus({ assetId, epoch, key, status })) === 'full') {
      // The station is answered as usual: it cannot do anything about it, an operator can.
      log.warn({ station: assetId, connector: key }, `connector status not stored: the station has ${MAX_CONNECTOR_STATUSES} connectors stored already`);
    }
    return {};
  });
}
