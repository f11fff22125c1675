import { z } from 'zod';

// The events the service emits (docs/events.md, "Event types"), each named here once: the
// outbox's CHECK constraint, the subscriptions' `events` enum and the OpenAPI document derive
// from this list. `webhook.test` is sent only by the test endpoint, to the one subscription it
// names; a subscription cannot list it.
export const SUBSCRIBABLE_EVENT_TYPES = [
  'payment.recorded',
  'payment.collected',
  'station.connected',
  'station.disconnected',
  'asset.password.changed',
  'asset.password.ignored',
] as const;
export const TEST_EVENT_TYPE = 'webhook.test';
export const EVENT_TYPES = [...SUBSCRIBABLE_EVENT_TYPES, TEST_EVENT_TYPE] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export const subscribableEventTypeSchema = z.enum(SUBSCRIBABLE_EVENT_TYPES);

// The `data` of each event. Never a password, hash or secret. Times are ISO 8601 in UTC.
const at = z.iso.datetime({ offset: false });

export const stationEventDataSchema = z.object({
  assetId: z.string(),
  network: z.string(),
  // The OCPP-J subprotocol the station connected with (ocpp-vocabulary.ts).
  protocol: z.string(),
  at,
});

export const passwordChangedDataSchema = z.object({
  assetId: z.string(),
  network: z.string(),
  rotationId: z.string(),
  // One of asset management's audit outcomes (asset-management/rotation.ts), or the resolution of
  // an UNCONFIRMED change (docs/events.md, "Event types").
  outcome: z.string(),
  at,
});

export const passwordIgnoredDataSchema = z.object({
  assetId: z.string(),
  network: z.string(),
  rotationId: z.string(),
  at,
});

export const webhookTestDataSchema = z.object({
  subscriptionId: z.string(),
  at,
});

export type StationEventData = z.infer<typeof stationEventDataSchema>;
export type PasswordChangedData = z.infer<typeof passwordChangedDataSchema>;
export type PasswordIgnoredData = z.infer<typeof passwordIgnoredDataSchema>;
export type WebhookTestData = z.infer<typeof webhookTestDataSchema>;

// What an area hands to appendEvents (the payments' events are appended by the statement that
// writes the payment: appendEventsSql, with the stored document as their data).
export type NewEvent =
  | { type: 'station.connected' | 'station.disconnected'; network: string; data: StationEventData }
  | { type: 'asset.password.changed'; network: string; data: PasswordChangedData }
  | { type: 'asset.password.ignored'; network: string; data: PasswordIgnoredData };
