// The list's peers (`npm run bench -- --peers`): Platformatic DB and PostGraphile serving the same
// session_payments rows with their own authorization, each verifying the service's own access
// token (the network-scoped one the floor comparison uses) with the service's public key. They live
// in bench/peers/ with their own package.json, installed on demand (`npm ci --prefix bench/peers`)
// so that the project's install never fetches them. This module prepares the database for them
// (PostGraphile's role and row-level security policy), starts them, builds the request each is
// sent for a list of session IDs, and checks that each answers the service's rows and refuses a
// request without a token before anything is measured. docs/performance.md ("Peers") describes
// the setup.
import { createPublicKey, type JsonWebKey } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { getTableColumns } from 'drizzle-orm';
import pg from 'pg';
import { sessionPayments } from '../src/payments/payments-tables.js';
import type { RequestShape } from './load.js';
import { BENCH_DIR } from './options.js';
import { LOOPBACK, SERVER_NODE, SERVER_NODE_ARGS, freePort, startChild, waitForHttp, type Child } from './processes.js';
import { ratioSummary, type SideBySide } from './side-by-side.js';

export const PEERS_DIR = join(BENCH_DIR, 'peers');
export const PEERS_INSTALL = 'npm ci --prefix bench/peers';
export const PEER_TARGET = 2;
// The claim the service puts a client's network in: its default (AUTH_NETWORK_CLAIM is not set
// for the benchmark's service).
const NETWORK_CLAIM = 'network';
// The scope the rule and the policy ask for: the one the CLI-made client has (bench/floor.ts).
const READ_SCOPE = 'read:sessionpayment';

export type PeerName = 'platformatic' | 'postgraphile';
export const PEER_LABELS: Record<PeerName, string> = { platformatic: 'Platformatic DB', postgraphile: 'PostGraphile' };
const APPLICATION_NAMES: Record<PeerName, string> = { platformatic: 'cns-bench-platformatic', postgraphile: 'cns-bench-postgraphile' };

// What a run with --peers needs that npm ci at the root does not install; null when it is there.
export function peersMissing(): string | null {
  const missing = ['@platformatic/db', 'postgraphile', 'postgraphile-plugin-connection-filter'].filter(
    (name) => !existsSync(join(PEERS_DIR, 'node_modules', name, 'package.json')),
  );
  return missing.length === 0 ? null : `--peers: ${missing.join(', ')} not installed in bench/peers; install them with: ${PEERS_INSTALL}`;
}

// Every column of the payment but the stored document (the service's rendering of the same
// columns): what each peer is asked for, in the names both give a column (camelCase).
export const PEER_FIELDS = Object.values(getTableColumns(sessionPayments))
  .map((column) => column.name)
  .filter((name) => name !== 'document')
  .map((name) => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()));

const GRAPHQL_QUERY = `query List($ids: [String!]!) { allSessionPayments(filter: { session: { in: $ids } }) { nodes { ${PEER_FIELDS.join(' ')} } } }`;

// One list call: the same IDs the service is asked for, one request each.
export function peerRequest(peer: PeerName, ids: string[], bearer: string | null): RequestShape {
  const authorization: Record<string, string> = bearer ? { authorization: bearer } : {};
  if (peer === 'platformatic') {
    return { method: 'GET', path: `/sessionPayments?where.session.in=${ids.join(',')}&limit=100&fields=${PEER_FIELDS.join(',')}`, headers: authorization };
  }
  return { method: 'POST', path: '/graphql', headers: { ...authorization, 'content-type': 'application/json' }, body: JSON.stringify({ query: GRAPHQL_QUERY, variables: { ids } }) };
}

async function adminQuery(databaseUrl: string, statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'cns-bench-admin' });
  await client.connect();
  try {
    for (const text of statements) await client.query(text);
  } finally {
    await client.end();
  }
}

// PostGraphile's authorization lives in the database: a role without login that may read
// session_payments, and a row-level security policy that lets it see the rows of the network in
// the request's verified token, when that token has the read scope. The service, the floor and
// Platformatic connect as the owner or a superuser, which the policy does not bind. Roles belong
// to the cluster, not the database: the returned function drops it (before the database goes).
export async function preparePeerDatabase(databaseUrl: string, role: string): Promise<() => Promise<void>> {
  const claim = (name: string) => `current_setting('jwt.claims.${name}', true)`;
  await adminQuery(databaseUrl, [
    `CREATE ROLE ${role} NOLOGIN`,
    `GRANT USAGE ON SCHEMA public TO ${role}`,
    `GRANT SELECT ON session_payments TO ${role}`,
    'ALTER TABLE session_payments ENABLE ROW LEVEL SECURITY',
    `CREATE POLICY peer_network_read ON session_payments FOR SELECT TO ${role}
       USING (network = ${claim(NETWORK_CLAIM)} AND '${READ_SCOPE}' = ANY (string_to_array(${claim('scope')}, ' ')))`,
  ]);
  return () => adminQuery(databaseUrl, [`DROP OWNED BY ${role}`, `DROP ROLE ${role}`]);
}

export interface RunningPeer {
  name: PeerName;
  child: Child;
  port: number;
  applicationName: string;
}

interface TokenFacts {
  publicKeyPem: string;
  issuer: string;
  audience: string;
}

// The service's public key for the token's kid (from its JWKS), and the issuer and audience the
// token carries: what both peers verify every request's token with.
async function tokenFacts(servicePort: number, bearer: string): Promise<TokenFacts> {
  const [header, payload] = bearer.replace(/^Bearer /, '').split('.').slice(0, 2).map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>);
  const res = await fetch(`http://${LOOPBACK}:${servicePort}/.well-known/jwks.json`);
  const { keys } = (await res.json()) as { keys: (JsonWebKey & { kid?: string })[] };
  const jwk = keys.find((k) => k.kid === header?.kid);
  if (!jwk || typeof payload?.iss !== 'string' || typeof payload.aud !== 'string') throw new Error('peers: the service\'s token has no published key, issuer or audience');
  return { publicKeyPem: createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString(), issuer: payload.iss, audience: payload.aud };
}

export async function startPeers(o: { databaseUrl: string; poolMax: number; role: string; servicePort: number; bearer: string; logDir: string }): Promise<RunningPeer[]> {
  const facts = await tokenFacts(o.servicePort, o.bearer);
  const peers: RunningPeer[] = [];
  for (const name of ['platformatic', 'postgraphile'] as const) {
    const port = await freePort();
    // The service's Node and flags, as the floor (bench/floor.ts).
    const child = startChild(name, SERVER_NODE, [...SERVER_NODE_ARGS, join(PEERS_DIR, `${name}-server.mjs`)], {
      cwd: PEERS_DIR,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        NODE_ENV: 'production',
        HOST: LOOPBACK,
        PORT: String(port),
        DATABASE_URL: o.databaseUrl,
        POOL_MAX: String(o.poolMax),
        PEER_APPLICATION_NAME: APPLICATION_NAMES[name],
        PEER_JWT_PUBLIC_KEY: facts.publicKeyPem,
        PEER_JWT_ISSUER: facts.issuer,
        PEER_JWT_AUDIENCE: facts.audience,
        PEER_NETWORK_CLAIM: NETWORK_CLAIM,
        PEER_ROLE: o.role,
      },
      logFile: join(o.logDir, `${name}.log`),
    });
    await waitForHttp(child, `http://${LOOPBACK}:${port}/`, 60_000);
    peers.push({ name, child, port, applicationName: APPLICATION_NAMES[name] });
  }
  return peers;
}

async function send(port: number, r: RequestShape): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://${LOOPBACK}:${port}${r.path}`, { method: r.method, headers: r.headers ?? {}, ...(r.body ? { body: r.body } : {}) });
  return { status: res.status, text: await res.text() };
}

// The rows a peer answered, or why it answered none.
function rowsOf(peer: PeerName, answer: { status: number; text: string }): { id: string; network: string }[] | string {
  if (answer.status !== 200) return `HTTP ${answer.status}: ${answer.text.slice(0, 300)}`;
  const body = JSON.parse(answer.text) as unknown;
  if (peer === 'platformatic') return Array.isArray(body) ? (body as { id: string; network: string }[]) : `not a list: ${answer.text.slice(0, 300)}`;
  const graph = body as { data?: { allSessionPayments?: { nodes?: { id: string; network: string }[] } }; errors?: unknown };
  return graph.data?.allSessionPayments?.nodes ?? `no nodes: ${answer.text.slice(0, 300)}`;
}

// Before anything is measured: for one list of IDs, each peer answers the payments the service
// answers (the same IDs, every field asked for, all of the token's network), and a request without
// a token gets none of them (Platformatic refuses it; PostGraphile runs it as the default role,
// for which the policy finds no claims).
export async function assertPeersAnswer(o: { peers: RunningPeer[]; servicePort: number; servicePath: string; ids: string[]; bearer: string; network: string }): Promise<string> {
  const service = await send(o.servicePort, { method: 'GET', path: o.servicePath, headers: { authorization: o.bearer } });
  const expected = (JSON.parse(service.text) as { id: string }[]).map((p) => p.id).sort();
  const checks: string[] = [];
  for (const peer of o.peers) {
    const answer = await send(peer.port, peerRequest(peer.name, o.ids, o.bearer));
    const rows = rowsOf(peer.name, answer);
    if (typeof rows === 'string') throw new Error(`${PEER_LABELS[peer.name]} did not answer the list: ${rows}`);
    const ids = rows.map((r) => r.id).sort();
    const complete = rows.every((r) => PEER_FIELDS.every((f) => f in r));
    if (ids.join() !== expected.join() || !complete || rows.some((r) => r.network !== o.network)) {
      throw new Error(`${PEER_LABELS[peer.name]} does not answer the service's rows: ${ids.length} payments against ${expected.length}${complete ? '' : ', fields missing'}`);
    }
    const anonymous = rowsOf(peer.name, await send(peer.port, peerRequest(peer.name, o.ids, null)));
    if (typeof anonymous !== 'string' && anonymous.length > 0) throw new Error(`${PEER_LABELS[peer.name]} answered ${anonymous.length} payments to a request without a token`);
    checks.push(`${PEER_LABELS[peer.name]}: the same ${ids.length} payments, ${Buffer.byteLength(answer.text)} B; without a token ${typeof anonymous === 'string' ? anonymous.slice(0, 8) : 'no rows'}`);
  }
  return `service ${Buffer.byteLength(service.text)} B; ${checks.join('; ')}`;
}

export function peerSummary(c: SideBySide, peer: PeerName): { ok: boolean; text: string } {
  return ratioSummary(c, peer, PEER_TARGET, PEER_LABELS[peer]);
}
