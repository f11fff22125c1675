import { z } from 'zod';

const dateTime = z.string().describe('ISO 8601 UTC date-time with milliseconds');

export const stationOutput = z
  .object({
    connected: z.boolean().describe('a socket for the station is open on some replica'),
    protocol: z.enum(['ocpp2.0.1', 'ocpp1.6']),
    connectedAt: dateTime,
    lastSeenAt: dateTime.describe('may lag the last message by up to 60 s'),
    vendor: z.string().nullable(),
    model: z.string().nullable(),
    serialNumber: z.string().nullable(),
    firmwareVersion: z.string().nullable(),
  })
  .describe('the OCPP connection; null before the first successful login');

export type StationView = z.output<typeof stationOutput>;
