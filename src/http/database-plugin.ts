import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.js';

// Migrates the database before anything reads a table: the plugins whose start-up work does
// (auth's signing key, the stations' replica lease) declare this one as a dependency. Several
// replicas starting together migrate once, under the start-up lock.
async function databasePlugin(_app: FastifyInstance, opts: { database: Database }) {
  await opts.database.migrate();
}

export default fp(databasePlugin, { name: 'database', dependencies: [] });
