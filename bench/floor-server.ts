// The floor of the 100-ID list: what this design costs with nothing around it. node:http + pg, no
// framework, no authentication, no log, no metrics: the service's own statement for a
// network-scoped token (the network is FLOOR_NETWORK, a parameter like the token's claim), as a
// named statement on a pool of POOL_MAX connections, the stored documents joined into the answer
// without being parsed. The session IDs are read the service's way (split, trimmed, NFC, blanks
// refused, duplicates dropped, IDs that cannot be stored left out), so both send PostgreSQL the
// same array. The benchmark checks once that both answer the same bytes (bench/floor.ts).
// Usage: DATABASE_URL=postgres://… PORT=… FLOOR_NETWORK=… node --import tsx bench/floor-server.ts
import http from 'node:http';
import { parse } from 'node:querystring';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { exceedsIdLength, hasForbiddenCharacter, splitList } from '../src/kernel/identifiers.js';
import { MAX_SESSION_IDS } from '../src/payments/payments-schemas.js';

// Fixed for comparison (docs/performance.md, "The floor"): a change here moves the floor.
export const FLOOR_SQL = 'SELECT document FROM session_payments WHERE session = ANY($1::text[]) AND network = $2';
export const FLOOR_APPLICATION_NAME = 'cns-bench-floor';
const LIST_PATH = '/payments/v1/session-payments';

// The IDs the service's list sends PostgreSQL, or null where the service answers 400.
export function floorSessionIds(raw: unknown): string[] | null {
  const joined = Array.isArray(raw) ? raw.join(',') : raw;
  if (typeof joined !== 'string' || joined.trim() === '') return null;
  const entries = splitList(joined);
  const distinct = new Set<string>();
  for (const entry of entries) {
    if (entry === '' || exceedsIdLength(entry)) return null;
    distinct.add(entry);
  }
  if (distinct.size > MAX_SESSION_IDS) return null;
  return [...distinct].filter((id) => !hasForbiddenCharacter(id));
}

function main(): void {
  const network = process.env.FLOOR_NETWORK;
  if (!network) throw new Error('FLOOR_NETWORK is required');
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL_MAX ?? 10), application_name: FLOOR_APPLICATION_NAME });
  const json = { 'content-type': 'application/json; charset=utf-8' };

  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    if ((q === -1 ? url : url.slice(0, q)) !== LIST_PATH) {
      res.writeHead(404).end();
      return;
    }
    const ids = floorSessionIds(q === -1 ? undefined : parse(url.slice(q + 1)).sessionIds);
    if (ids === null) {
      res.writeHead(400, json).end('{"message":"bad sessionIds"}');
      return;
    }
    if (ids.length === 0) {
      res.writeHead(200, { ...json, 'content-length': 2 }).end('[]');
      return;
    }
    pool.query<{ document: string }>({ name: 'floor_list', text: FLOOR_SQL, values: [ids, network] }).then(
      ({ rows }) => {
        let body = '[';
        for (let i = 0; i < rows.length; i++) body += i === 0 ? rows[i]!.document : `,${rows[i]!.document}`;
        body += ']';
        // With its length, as the service sends it: writeHead alone would make the answer chunked.
        res.writeHead(200, { ...json, 'content-length': Buffer.byteLength(body) }).end(body);
      },
      (error: unknown) => {
        console.error(error);
        res.writeHead(500).end();
      },
    );
  });
  server.listen(Number(process.env.PORT ?? 3002), process.env.HOST ?? '127.0.0.1', () => console.log('floor server listening'));
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => server.close(() => void pool.end().then(() => process.exit(0))));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
