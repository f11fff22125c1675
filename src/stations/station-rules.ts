// Pure rules of a station's login and of its connection's bookkeeping, without I/O.
import type { IncomingHttpHeaders } from 'node:http';

export type SecurityProfile = 1 | 2 | 3;

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
  if (required >= 3) return 'security profile 3 (client certificates) is not served';
  if (required === 2 && !overTls) return 'security profile 2 needs TLS';
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

// The station's answer to the password command as one status, which the rotation maps to its
// outcome (only `Accepted` switches the password). 1.6 ChangeConfiguration answers one status.
// 2.0.1 SetVariables answers a list: it is `Accepted` only when the list is not empty and every
// result accepts the password itself (SecurityCtrlr / BasicAuthPassword, the Actual attribute);
// a result for anything else, or any refusal, is not an acceptance.
export function passwordCommandStatus(protocol: 'ocpp1.6' | 'ocpp2.0.1', answer: unknown): string {
  const a = (answer ?? {}) as { status?: unknown; setVariableResult?: unknown };
  if (protocol === 'ocpp1.6') return typeof a.status === 'string' ? a.status : 'no status';
  const results = Array.isArray(a.setVariableResult) ? (a.setVariableResult as unknown[]) : [];
  if (results.length === 0) return 'no result';
  const statuses: string[] = [];
  for (const r of results) {
    const result = (r ?? {}) as { attributeStatus?: unknown; attributeType?: unknown; component?: { name?: unknown }; variable?: { name?: unknown } };
    const status = typeof result.attributeStatus === 'string' ? result.attributeStatus : 'no status';
    const component = String(result.component?.name);
    const variable = String(result.variable?.name);
    const attribute = result.attributeType ?? 'Actual';
    if (component !== 'SecurityCtrlr' || variable !== 'BasicAuthPassword' || attribute !== 'Actual') {
      return `${status} for ${component}/${variable}${attribute === 'Actual' ? '' : ` (${String(attribute)})`}`;
    }
    statuses.push(status);
  }
  // A refusal outweighs a reboot, which outweighs acceptance: the password switches only when no
  // result holds it back, and is left unconfirmed only when the station may still apply it.
  return statuses.find((s) => s !== 'Accepted' && s !== 'RebootRequired') ?? statuses.find((s) => s === 'RebootRequired') ?? 'Accepted';
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
