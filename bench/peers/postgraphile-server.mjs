// A peer of the 100-ID list: PostGraphile 4 over the bench database, its generated GraphQL API
// with the connection-filter plugin (so that a list of session IDs is one `in` filter), and its
// own authorization: every request's JWT is verified with the service's public key (ES256,
// issuer and audience checked), its claims become the transaction's `jwt.claims.*` settings, and
// the query runs as PEER_ROLE, which may only SELECT session_payments through a row-level security
// policy on those claims (network and scope). bench/peers.ts creates the role and the policy and
// starts it; docs/performance.md ("Peers") describes the setup.
// Usage: DATABASE_URL=… PORT=… PEER_ROLE=… PEER_JWT_PUBLIC_KEY=<PEM> PEER_JWT_ISSUER=…
//        PEER_JWT_AUDIENCE=… node bench/peers/postgraphile-server.mjs
import http from 'node:http';
import pg from 'pg';
import { postgraphile } from 'postgraphile';
import ConnectionFilterPlugin from 'postgraphile-plugin-connection-filter';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

// application_name tells this peer's backends apart (bench/side-by-side.ts).
const pool = new pg.Pool({
  connectionString: env('DATABASE_URL'),
  max: Number(process.env.POOL_MAX ?? 10),
  application_name: process.env.PEER_APPLICATION_NAME ?? 'cns-bench-postgraphile',
});

const handler = postgraphile(pool, 'public', {
  appendPlugins: [ConnectionFilterPlugin],
  jwtPublicKey: env('PEER_JWT_PUBLIC_KEY'),
  jwtVerifyOptions: { algorithms: ['ES256'], issuer: env('PEER_JWT_ISSUER'), audience: env('PEER_JWT_AUDIENCE') },
  // The service's tokens carry no `role` claim: every request runs as this role, tokenless ones
  // too, for which the policy finds no claims and so no rows.
  pgDefaultRole: env('PEER_ROLE'),
  dynamicJson: true,
  graphiql: false,
  disableQueryLog: true,
  watchPg: false,
  retryOnInitFail: false,
});

const server = http.createServer(handler);
server.listen(Number(env('PORT')), process.env.HOST ?? '127.0.0.1', () => console.log('postgraphile peer listening'));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => void pool.end().then(() => process.exit(0))));
