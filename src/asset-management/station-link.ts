// What asset management needs from the station side, said here and implemented by the stations
// area (stations/station-connections.ts): the connection view each asset shows, whether a station
// can be reached now, and the delivery of a new password. The stations area depends on asset
// management, never the other way round; the linter holds both directions (eslint.config.js).
import { z } from 'zod';
import { OCPP_SUBPROTOCOLS } from '../kernel/ocpp-vocabulary.js';
import type { StationAnswer } from './rotation.js';

const dateTime = z.string().describe('ISO 8601 UTC date-time with milliseconds');

export const stationOutput = z
  .object({
    connected: z.boolean().describe('a socket for the station is open on some replica'),
    protocol: z.enum(OCPP_SUBPROTOCOLS),
    connectedAt: dateTime,
    lastSeenAt: dateTime.describe('may lag the last message by up to 60 s'),
    vendor: z.string().nullable(),
    model: z.string().nullable(),
    serialNumber: z.string().nullable(),
    firmwareVersion: z.string().nullable(),
  })
  .describe('the OCPP connection; null before the first successful login');

export type StationView = z.output<typeof stationOutput>;

export interface PasswordCommand {
  assetId: string;
  password: string;
  // Epoch milliseconds: after it the command is never sent, and its sender no longer waits.
  deadline: number;
}

export interface StationLink {
  // The connection of each asset that has logged in at least once, in one read for a page of
  // assets; an asset without one is missing from the map.
  views(assetIds: string[]): Promise<Map<string, StationView>>;
  // Whether an open, authenticated socket of the station exists on some replica: asked of the one
  // the connection table names, false when it does not answer by the deadline. Never throws.
  isConnected(assetId: string, deadline: number): Promise<boolean>;
  // Delivers the command wherever the station is connected. Never throws.
  sendPasswordChange(command: PasswordCommand): Promise<StationAnswer>;
}
