// Whether a station has an open, authenticated socket on some replica, asked of the replica the
// connection table names rather than read from the table: a row can be stale (a release whose
// write was lost, a replica that died with its lease still running).
import type { Db } from '../db/database.js';
import type { CommandBus } from './command-bus.js';
import { findStationHolder } from './replicas-repository.js';

export interface PresenceDeps {
  db: Db;
  replicaId: string;
  bus: CommandBus;
  holdsHere(assetId: string): boolean;
}

// False when the row names no live replica, names this one (which holds no socket of it), or the
// replica it names does not answer by the deadline. Never throws.
export async function stationConnected(deps: PresenceDeps, assetId: string, deadline: number): Promise<boolean> {
  if (deps.holdsHere(assetId)) return true;
  try {
    const holder = await findStationHolder(deps.db, assetId);
    if (!holder || holder.replicaId === deps.replicaId) return false;
    return (await deps.bus.holds(holder, assetId, deadline)) === true;
  } catch {
    // Unknown when the table cannot be read or the question not sent: taken as connected, the
    // command's own answer decides.
    return true;
  }
}
