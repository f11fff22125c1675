// The time limits every listening server of the service applies, the API port and the OCPP TLS
// port alike: one source, so a client that does not send its request in time meets the same limit
// whichever port it connects to.

// Idle kept-alive sockets are closed after this; a load balancer in front should drop its idle
// upstream connections sooner (or retry a request its reuse of a closing socket fails).
export const KEEP_ALIVE_TIMEOUT_MS = 5000;
// How often Node looks for requests past REQUEST_TIMEOUT_MS (its default is 30 s): a request
// that has not arrived is ended within this long after the limit.
const CONNECTIONS_CHECKING_INTERVAL_MS = 1000;

export interface HttpTimeLimits {
  requestTimeout: number;
  headersTimeout: number;
  keepAliveTimeout: number;
  connectionsCheckingInterval: number;
}

// The limit bounds the arrival of headers and body only: Node stops timing a request once its
// body is complete, so a handler may take longer (a change-password waiting for its station).
// No socket idle timeout for that reason. keepAliveTimeout is not read from the constructor's
// options by every Node version: a server is given it as a property too.
export function httpTimeLimits(requestTimeoutMs: number): HttpTimeLimits {
  return {
    requestTimeout: requestTimeoutMs,
    headersTimeout: requestTimeoutMs,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
  };
}

// A TLS listener's handshake is part of a request's arrival: a connection that never completes it
// (never sends a ClientHello) is dropped after the same limit, not Node's default two minutes.
// Node times the handshake and the request each on its own, so a client that drags both may hold
// a connection for twice the limit at most.
export function tlsTimeLimits(requestTimeoutMs: number): HttpTimeLimits & { handshakeTimeout: number } {
  return { ...httpTimeLimits(requestTimeoutMs), handshakeTimeout: requestTimeoutMs };
}
