// Pure rules of a station's login and of its connection's bookkeeping, without I/O.
import type { IncomingHttpHeaders } from 'node:http';
import { profileNeedsTls, profileUsesClientCertificates, type SecurityProfile } from '../kernel/ocpp-vocabulary.js';

// X-Forwarded-Proto of a trusted proxy: every hop it lists must have been TLS, so a proxy that
// appends to a value the station sent cannot be talked into profile 2 by that value.
export function forwardedOverTls(headers: IncomingHttpHeaders): boolean {
  const header = headers['x-forwarded-proto'];
  const values = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v.length > 0);
  return values.length > 0 && values.every((v) => v === 'https' || v === 'wss');
}

// Why a connection may not log in as this asset, before any password is looked at; null if it may.
// The asset's profile counts, and so does the network's minimum, which may have been raised since.
// Profile 3 authenticates with client certificates, which this service does not serve.
export function profileProblem(assetProfile: number, minProfile: SecurityProfile, overTls: boolean): string | null {
  const required = Math.max(assetProfile, minProfile);
  if (profileUsesClientCertificates(required)) return `security profile ${required} (client certificates) is not served`;
  if (profileNeedsTls(required) && !overTls) return `security profile ${required} needs TLS`;
  return null;
}

// Only `/ocpp/{identity}` is the OCPP endpoint; the identity is an asset id (never percent-encoded:
// the id syntax has nothing to encode).
export function ocppIdentity(url: string | undefined, idPattern: RegExp): string | null {
  const path = (url ?? '').split('?', 1)[0]!;
  const match = /^\/ocpp\/([^/]+)\/?$/.exec(path);
  return match && idPattern.test(match[1]!) ? match[1]! : null;
}

// When a replica renews its lease and writes what its stations were last seen at. The lease is
// renewed three times per lease, so one late renewal does not end it. Every message moves a
// station's lastSeenAt in memory; the stored value is written at most once per `seenWriteMs`
// (10,000 stations heartbeating every 5 s would otherwise be 2,000 writes a second), by a flush
// every `seenFlushMs` that takes the stations then due. So it lags the last message by at most
// their sum, which docs/stations.md ("Liveness and lastSeenAt") bounds at 60 s.
export function stationTimings(leaseSeconds: number): { renewMs: number; seenWriteMs: number; seenFlushMs: number } {
  const renewMs = Math.max(100, Math.floor((leaseSeconds * 1000) / 3));
  return { renewMs, seenWriteMs: Math.min(leaseSeconds, 30) * 1000, seenFlushMs: Math.min(1000, renewMs) };
}

// How long a disconnect whose write failed waits before its next try: 0.5 s, doubling, at most
// 5 s. The first retry comes soon because `connected` must read false within 5 s of a disconnect
// (the lease renewal's reconciliation comes only every third of a lease, 10 s by default); the cap
// keeps a long database outage at one try per station every 5 s.
export function releaseRetryDelayMs(failures: number): number {
  return Math.min(5000, 500 * 2 ** Math.min(Math.max(failures - 1, 0), 4));
}

// A string a station sent, as it can be stored: PostgreSQL's text and jsonb cannot hold NUL, and
// a schema-valid BootNotification may carry one. Refused by the database, the statement failed
// and took every station batched with it; each NUL becomes U+FFFD instead, the rest is kept.
export function storableText(value: unknown): string | null {
  return typeof value === 'string' ? value.replaceAll('\u0000', '\uFFFD') : null;
}
