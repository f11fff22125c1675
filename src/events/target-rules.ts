import { lookup } from 'node:dns/promises';
import { checkTargetUrlForm, classifyAddress } from './target-addresses.js';
import { LookupTimedOut } from './target-lookups.js';

// A webhook target's URL checked when a subscription names it, and the resolution that the
// delivery's connections use too (docs/events.md, "Targets"). The rules themselves are pure, in
// target-addresses.ts.

export type ResolvedAddress = { address: string; family: number };

// Every address a host name resolves to. The system's resolver by default; tests pass their own to
// make a name resolve where they need it.
export type ResolveHost = (hostname: string) => Promise<ResolvedAddress[]>;

export const resolveWithSystem: ResolveHost = (hostname) => lookup(hostname, { all: true, verbatim: true });

// Resolver answers that mean "no such name" (getaddrinfo's, as Node names them).
const NOT_FOUND_CODES = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME', 'EAI_NODATA']);

// A failure is `refused` when the rules refuse an address the name resolves to; otherwise the name
// could not be resolved (no such name, a resolver that failed or did not answer in time).
export type TargetResolution = { ok: true; addresses: ResolvedAddress[] } | { ok: false; reason: string; refused: boolean };

const unresolved = (reason: string): TargetResolution => ({ ok: false, reason, refused: false });

// Resolves `hostname` and refuses it when any of its addresses is refused: a name that answers a
// public and a private address is not half allowed.
export async function resolveTarget(
  hostname: string,
  options: { allowPrivateTargets: boolean; resolve?: ResolveHost | undefined },
): Promise<TargetResolution> {
  let addresses: ResolvedAddress[];
  try {
    addresses = await (options.resolve ?? resolveWithSystem)(hostname);
  } catch (error) {
    if (error instanceof LookupTimedOut) return unresolved(`the host name ${hostname} could not be resolved in time`);
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== undefined && NOT_FOUND_CODES.has(code)) return unresolved(`the host name ${hostname} does not resolve`);
    return unresolved(`the host name ${hostname} could not be resolved${code === undefined ? '' : ` (${code})`}`);
  }
  if (addresses.length === 0) return unresolved(`the host name ${hostname} does not resolve`);
  for (const { address } of addresses) {
    const verdict = classifyAddress(address, options);
    if (!verdict.allowed) return { ok: false, reason: `the host name ${hostname} resolves to ${verdict.reason}`, refused: true };
  }
  return { ok: true, addresses };
}

// Whether a subscription may name `url`: its form (https, no credentials, length), then every
// address its host resolves to. The same rules hold again at every connection of a delivery, so a
// name that changes its answer later is caught there.
export async function checkTargetUrl(
  url: string,
  options: { allowPrivateTargets: boolean; resolve?: ResolveHost },
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const form = checkTargetUrlForm(url, options);
  if (!form.ok) return form;
  if (form.hostIsAddress) return { ok: true };
  const resolution = await resolveTarget(form.host, options);
  return resolution.ok ? { ok: true } : { ok: false, reason: resolution.reason };
}
