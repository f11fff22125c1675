// The rules of Idempotency-Key (draft-ietf-httpapi-idempotency-key-header, with Stripe's
// semantics): what a key is, when two requests are the same request, and what a stored key means
// for a request that arrives with it. Pure: the repository stores, the plugin wires it to HTTP.
import { createHash } from 'node:crypto';

// A key lives this long from its first request; a later reuse is a fresh request (Stripe: 24 h).
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;

// The asset-management family's code for a key whose first request still runs; the
// payments family's 409 is always CONFLICT.
export const IDEMPOTENCY_KEY_IN_USE = 'IDEMPOTENCY_KEY_IN_USE';
const MAX_KEY_LENGTH = 255;

// Printable ASCII, the characters of a Structured Fields string (RFC 8941 §3.3.3); a bare key
// has no comma, so a repeated header (which arrives joined with ", ") is refused, not merged.
const PRINTABLE = /^[\x20-\x7E]+$/;
const BARE = /^[\x20-\x2B\x2D-\x7E]+$/;

export const KEY_RULE = `must be one value of 1 to ${MAX_KEY_LENGTH} printable ASCII characters: bare (without commas) or as a quoted string ("…")`;

// The draft writes the key as a Structured Fields string ("8e03978e-…"); Stripe and most clients
// send it bare. Both name the same key: a value that starts with a quote is read as an sf-string
// (with \" and \\ escapes), anything else is the key as sent. HTTP has already cut surrounding
// whitespace. null: not a key (KEY_RULE says why).
export function parseIdempotencyKey(raw: string): string | null {
  let key = raw;
  if (raw.startsWith('"')) {
    const match = /^"((?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*)"$/.exec(raw);
    if (!match) return null;
    key = match[1]!.replace(/\\(["\\])/g, '$1');
  } else if (!BARE.test(raw)) {
    return null;
  }
  return key.length > 0 && key.length <= MAX_KEY_LENGTH && PRINTABLE.test(key) ? key : null;
}

// JSON with object keys in code-unit order and no whitespace (the JSON Canonicalization Scheme of
// RFC 8785 for the values JSON.parse yields): two bodies that parse to the same value, whatever
// their key order, spacing or escapes, have one canonical text, and different values have
// different texts.
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    // undefined (no body) is null; numbers and strings as JSON.stringify writes them (as JCS does).
    return value === undefined ? 'null' : JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

export interface RequestIdentity {
  method: string;
  // the route's pattern (e.g. /payments/v1/session-payments/:id/collect) and its parameters, so
  // spellings of one URL (a trailing slash, percent-encoding) are one request
  route: string;
  params: unknown;
  query: unknown;
  // the body as parsed from JSON, before validation turned it into the service's input
  body: unknown;
}

// What makes two requests with one key "the same request": method, target and canonical body.
export function requestFingerprint(request: RequestIdentity): string {
  const text = canonicalJson([request.method, request.route, request.params ?? null, request.query ?? null, request.body]);
  return createHash('sha256').update(text).digest('hex');
}

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export type StoredKey =
  | { state: 'IN_FLIGHT'; fingerprint: string; expiresAt: Date; lockedUntil: Date }
  | { state: 'COMPLETED'; fingerprint: string; expiresAt: Date; response: StoredResponse };

export type Decision =
  // nothing usable is stored: this request runs (and takes over the row if there is one)
  | { kind: 'run' }
  | { kind: 'replay'; response: StoredResponse }
  // the key was used for another request (422)
  | { kind: 'mismatch' }
  // the first request with this key has not finished (409)
  | { kind: 'in_flight' };

export function decide(stored: StoredKey | undefined, fingerprint: string, now: Date): Decision {
  if (stored === undefined || stored.expiresAt.getTime() <= now.getTime()) return { kind: 'run' };
  // A claim whose holder never finished (its process died, or the database failed when it tried
  // to give the key back) has no answer to replay: the key is free again.
  if (stored.state === 'IN_FLIGHT' && stored.lockedUntil.getTime() <= now.getTime()) return { kind: 'run' };
  if (stored.fingerprint !== fingerprint) return { kind: 'mismatch' };
  if (stored.state === 'IN_FLIGHT') return { kind: 'in_flight' };
  return { kind: 'replay', response: stored.response };
}

// Which answers become the key's replayable answer. A 5xx (a database fault, a bug) says the
// request did not complete: it is not stored and the key is given back, so the client's retry
// runs again. Every other answer of the operation, 4xx included, is stored: the operation ran
// and decided (Stripe does the same). Validation errors, 401, 403 from the token and 429 are
// answered before a key is taken, so they are never stored.
export function isReplayable(status: number): boolean {
  return status >= 200 && status < 500;
}

// The headers of an answer that belong to it and come back on a replay.
export const REPLAYED_HEADERS = ['content-type', 'location'] as const;

// How long a claim holds its key before it counts as abandoned: longer than any request on these
// routes can run. Each of their statements is bounded by the statement timeout, and each wait
// for a connection by the acquire timeout; none runs more than a few of them.
export function inFlightLeaseMs(limits: { statementTimeoutMs: number; acquireTimeoutMs: number }): number {
  return Math.max(60_000, 4 * (limits.statementTimeoutMs + limits.acquireTimeoutMs));
}
