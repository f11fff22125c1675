import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';

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

// The signature is the scheme's one HMAC (`v1,` and the base64 HMAC-SHA256 of
// `id.timestamp.body`, keyed with the secret's base64-decoded bytes), made with node:crypto: the
// reference library's pure-JavaScript SHA-256 took about a tenth of a delivery's CPU. The tests verify
// every delivery with the reference library (`standardwebhooks`).
const SECRET_PREFIX = 'whsec_';

// The key of each secret, decoded once; a rotated secret gets its own. Bounded by the secrets a
// replica's attempts in flight could use at once, so old ones do not pile up.
const keys = new LRUCache<string, KeyObject>({ max: 1_000 });

function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    key = createSecretKey(Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'));
    keys.set(secret, key);
  }
  return key;
}

export function signMessage(secret: string, eventId: string, body: string, now: Date): SignedMessage {
  const timestamp = String(Math.floor(now.getTime() / 1000));
  const signature = createHmac('sha256', keyOf(secret)).update(`${eventId}.${timestamp}.${body}`).digest('base64');
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': timestamp,
      'webhook-signature': `v1,${signature}`,
    },
  };
}
