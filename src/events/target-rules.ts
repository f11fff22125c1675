import { lookup } from 'node:dns/promises';
import pLimit from 'p-limit';
import { checkTargetUrlForm, classifyAddress } from './target-addresses.js';

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

// The lookups of the API's requests (docs/events.md, "Targets"): each system lookup holds a thread
// of libuv's pool, which station logins' password hashes share, until the resolver answers, and a
// name whose servers never answer holds it for the resolver's own time limit. So a request waits
// at most CHECK_LOOKUP_TIMEOUT_MS for its answer (then a 400), at most CHECK_LOOKUPS run at once,
// and requests for the same name at once share one lookup (boundedResolver).
export const CHECK_LOOKUP_TIMEOUT_MS = 5_000;
export const CHECK_LOOKUPS = 2;

class LookupTimedOut extends Error {}

export function boundedResolver(resolve: ResolveHost, options: { timeoutMs: number; concurrency: number }): ResolveHost {
  const limit = pLimit(options.concurrency);
  // The lookup of each name under way or waiting for a slot, and how many requests still wait for it.
  const running = new Map<string, { result: Promise<ResolvedAddress[]>; waiting: { n: number } }>();
  // A lookup of `hostname` for its first request (counted before the lookup can start).
  function share(hostname: string) {
    const waiting = { n: 1 };
    // A lookup whose requests all gave up while it waited for a slot is not started.
    const result = limit(() => (waiting.n === 0 ? Promise.reject(new LookupTimedOut()) : resolve(hostname)));
    const entry = { result, waiting };
    const forget = () => {
      if (running.get(hostname) === entry) running.delete(hostname);
    };
    result.then(forget, forget);
    running.set(hostname, entry);
    return entry;
  }
  return (hostname) => {
    const joined = running.get(hostname);
    if (joined) joined.waiting.n++;
    const { result, waiting } = joined ?? share(hostname);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        waiting.n--;
        reject(new LookupTimedOut());
      }, options.timeoutMs);
    });
    return Promise.race([result, timedOut]).finally(() => clearTimeout(timer));
  };
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
