// A peer of the 100-ID list: Platformatic DB over the bench database, its generated REST API for
// session_payments with its own authorization. Every request must carry one of the service's
// access tokens (ES256, verified with the service's public key, issuer and audience checked by
// @fastify/jwt); the token's `scope` claim is the role, and the only rule lets the role
// read:sessionpayment find rows whose network equals the token's network claim, nothing else.
// bench/peers.ts starts it; docs/performance.md ("Peers") describes the setup.
// Usage: DATABASE_URL=… PORT=… PEER_JWT_PUBLIC_KEY=<PEM> PEER_JWT_ISSUER=… PEER_JWT_AUDIENCE=…
//        PEER_NETWORK_CLAIM=network node bench/peers/platformatic-server.mjs
import { buildServer } from '@platformatic/db';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

// Backends are told apart by application_name (bench/side-by-side.ts); @databases/pg reads it from
// the connection string.
const url = new URL(env('DATABASE_URL'));
url.searchParams.set('application_name', process.env.PEER_APPLICATION_NAME ?? 'cns-bench-platformatic');

const app = await buildServer({
  server: { hostname: process.env.HOST ?? '127.0.0.1', port: Number(env('PORT')), logger: { level: 'warn' } },
  db: {
    connectionString: url.toString(),
    poolSize: Number(process.env.POOL_MAX ?? 10),
    // Only the payments: the service's other tables are not the peer's business.
    include: { session_payments: true },
    graphql: false,
    openapi: true,
    // The generated list route refuses a limit above `max`; a 100-ID list asks for limit=100.
    limit: { default: 100, max: 100 },
  },
  authorization: {
    jwt: {
      secret: { public: env('PEER_JWT_PUBLIC_KEY') },
      // fast-jwt's cache of verified tokens, as the service has it (src/auth/auth-plugin.ts).
      verify: { algorithms: ['ES256'], allowedIss: env('PEER_JWT_ISSUER'), allowedAud: env('PEER_JWT_AUDIENCE'), cache: true },
    },
    roleKey: 'scope',
    rules: [
      {
        role: 'read:sessionpayment',
        entity: 'sessionPayment',
        find: { checks: { network: env('PEER_NETWORK_CLAIM') } },
        save: false,
        delete: false,
      },
    ],
  },
});
await app.start();
console.log('platformatic peer listening');
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => void app.close().then(() => process.exit(0)));
