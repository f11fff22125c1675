import type { AppConfig } from '../../kernel/config.js';

// The commands the service prints for a person to paste, written once so the start-up banner and
// the CLI print the same, and each runs where the service runs.

// A compiled install (the Docker image, `npm start`) runs from dist/, where the CLI is plain
// node: tsx, which `npm run cli` needs, is a dev dependency and absent from the image.
export function cliCommand(moduleUrl: string = import.meta.url): string {
  return /\/dist\/.*\.js$/.test(new URL(moduleUrl).pathname) ? 'node dist/cli.js' : 'npm run cli --';
}

// Where clients reach the service: PUBLIC_URL (a published port, a balancer), else where it listens.
export function clientBaseUrl(config: Pick<AppConfig, 'publicUrl' | 'host'>, port: number): string {
  return config.publicUrl ?? localBaseUrl(config.host, port);
}

// Where a client on this machine reaches a server listening on host:port.
function localBaseUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

// Sets $TOKEN in a POSIX shell with nothing but curl and sed (the Docker image has neither jq nor
// a guarantee of node on the caller's side).
export function tokenCommand(baseUrl: string, clientId: string, clientSecret: string): string {
  return `TOKEN=$(curl -s -u '${clientId}:${clientSecret}' -d grant_type=client_credentials ${baseUrl}/oauth/token | sed -E 's/.*"access_token":"([^"]+)".*/\\1/')`;
}

export function listCommand(baseUrl: string, sessionIds: string[]): string {
  return `curl -s -H "Authorization: Bearer $TOKEN" '${baseUrl}/payments/v1/session-payments?sessionIds=${sessionIds.join(',')}'`;
}
