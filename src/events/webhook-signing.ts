import { Webhook } from 'standardwebhooks';

// The Standard Webhooks message of one attempt (docs/events.md, "Format"): the body is the same
// on every attempt of an event, the id is the event's, the timestamp the attempt's.
export interface SignedMessage {
  headers: Record<string, string>;
  body: string;
}

export function eventBody(event: { type: string; createdAt: Date; data: string }): string {
  // `data` is JSON text already (a payment's stored document is sent byte for byte).
  return `{"type":${JSON.stringify(event.type)},"timestamp":${JSON.stringify(event.createdAt.toISOString())},"data":${event.data}}`;
}

export function signMessage(secret: string, eventId: string, body: string, now: Date): SignedMessage {
  const signature = new Webhook(secret).sign(eventId, now, body);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': signature,
    },
  };
}
