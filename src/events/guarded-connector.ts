import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import { buildConnector } from 'undici';
import { classifyAddress, unbracketed } from './target-addresses.js';
import { resolveTarget, type ResolveHost } from './target-rules.js';

// The connections of the webhook client (docs/events.md, "Targets"): every address is checked as
// the connection is made, not before, so a name whose answer changes between a check and the
// connection (DNS rebinding) is caught, and nothing is sent to a refused address:
// - an address literal is checked before any connection is tried (Node's net.connect does not
//   resolve literals, so a lookup hook alone would never see it);
// - a host name is resolved by the lookup that net.connect calls, which refuses the name when any
//   of its addresses is refused, so the socket only ever gets checked addresses;
// - the peer's address is checked once more when the socket connects, before the request is sent.

export class TargetRefusedError extends Error {
  readonly code = 'ETARGETREFUSED';
}

// A host name that could not be resolved (no such name, a resolver that failed): not a target the
// rules refused.
export class TargetUnresolvedError extends Error {
  readonly code = 'ETARGETUNRESOLVED';
}

function lookupGuard(options: { allowPrivateTargets: boolean; resolve?: ResolveHost | undefined }): LookupFunction {
  return (hostname: string, lookupOptions: LookupOptions, callback) => {
    resolveTarget(hostname, options).then(
      (resolution) => {
        if (!resolution.ok) {
          callback(resolution.refused ? new TargetRefusedError(resolution.reason) : new TargetUnresolvedError(resolution.reason), '', 0);
          return;
        }
        const family = lookupOptions.family === 'IPv4' ? 4 : lookupOptions.family === 'IPv6' ? 6 : lookupOptions.family;
        const addresses: LookupAddress[] = resolution.addresses.filter((entry) => !family || entry.family === family);
        const first = addresses[0];
        if (first === undefined) {
          callback(Object.assign(new Error(`the host name ${hostname} has no IPv${family} address`), { code: 'ENOTFOUND' }), '', 0);
        } else if (lookupOptions.all) {
          callback(null, addresses);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (error: Error) => callback(error, '', 0),
    );
  };
}

// An undici connector (Agent's `connect`) that applies the target rules to every connection.
export function guardedConnector(options: {
  allowPrivateTargets: boolean;
  timeoutMs: number;
  resolve?: ResolveHost | undefined;
}): buildConnector.connector {
  const connect = buildConnector({ timeout: options.timeoutMs, lookup: lookupGuard(options) });
  return (target, callback) => {
    const host = unbracketed(target.hostname);
    if (isIP(host) !== 0) {
      const verdict = classifyAddress(host, options);
      if (!verdict.allowed) {
        callback(new TargetRefusedError(`the URL's host is ${verdict.reason}`), null);
        return;
      }
    }
    connect(target, (error, socket) => {
      if (error !== null) {
        callback(error, null);
        return;
      }
      const peer = (socket as Socket).remoteAddress;
      const verdict = peer === undefined ? { allowed: false as const, reason: 'an unknown address' } : classifyAddress(peer, options);
      if (!verdict.allowed) {
        socket.destroy();
        callback(new TargetRefusedError(`the connection reached ${verdict.reason}`), null);
        return;
      }
      callback(null, socket);
    });
  };
}
