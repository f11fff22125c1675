// Every way Node reports that the database could not be reached, or was lost, at the network:
// its name does not resolve (ENOTFOUND: no such name, as when a compose service is stopped;
// EAI_AGAIN, EAI_FAIL: the resolver failed), nobody listens, no route, the route times out, the
// peer or the network went away. Each may pass on its own, so each is "unavailable, retry".
export const NETWORK_FAILURE_CODES: readonly string[] = [
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENETRESET',
  'EADDRNOTAVAIL',
];
const NETWORK_FAILURES = new Set(NETWORK_FAILURE_CODES);

// A Node error that says the database cannot be reached now. ENOENT counts only for a connect: a
// Unix socket path (host=/var/run/postgresql) whose server is not running.
export function isNetworkFailure(error: object): boolean {
  const { code, syscall } = error as { code?: unknown; syscall?: unknown };
  if (typeof code !== 'string') return false;
  return NETWORK_FAILURES.has(code) || (code === 'ENOENT' && syscall === 'connect');
}
