import type { StationView } from '../asset-management/station-credentials-service.js';
import type { Executor } from '../db/database.js';
import { findStations } from './stations-repository.js';

// The `station` object of each asset, in one query for a page of assets.
export async function stationViews(db: Executor, assetIds: string[]): Promise<Map<string, StationView>> {
  const rows = await findStations(db, assetIds);
  return new Map(
    rows.map((r) => [
      r.assetId,
      {
        connected: r.connected === true,
        protocol: r.protocol,
        connectedAt: r.connectedAt.toISOString(),
        lastSeenAt: r.lastSeenAt.toISOString(),
        vendor: r.vendor,
        model: r.model,
        serialNumber: r.serialNumber,
        firmwareVersion: r.firmwareVersion,
      },
    ]),
  );
}
