// A migration that rewrites rows is run here on rows written before it: the migrations up to the
// one before it first (a copy of the folder with its journal cut there), rows as the older version
// wrote them, then the whole folder, as an upgrade of a running installation would. On the run's
// database: a throwaway PostgreSQL database with DATABASE_URL, else an in-memory PGlite.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf, type Db } from '../../src/db/database.js';
import { createServerDatabase } from '../helpers/test-database.js';

const MIGRATIONS = fileURLToPath(new URL('../../migrations', import.meta.url));

interface Journal {
  entries: Array<{ tag: string }>;
}

// The migrations folder as it stood when `lastTag` was the newest migration.
function folderUpTo(lastTag: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cns-migrations-'));
  cpSync(MIGRATIONS, dir, { recursive: true });
  const journal = JSON.parse(readFileSync(join(dir, 'meta/_journal.json'), 'utf8')) as Journal;
  const end = journal.entries.findIndex((e) => e.tag === lastTag);
  if (end < 0) throw new Error(`no migration ${lastTag}`);
  writeFileSync(join(dir, 'meta/_journal.json'), JSON.stringify({ ...journal, entries: journal.entries.slice(0, end + 1) }));
  return dir;
}

describe('migrations that rewrite rows', () => {
  let db: Db;
  let migrate: (folder: string) => Promise<void>;
  let close: () => Promise<void>;
  const folders: string[] = [];

  beforeAll(async () => {
    if (process.env.DATABASE_URL) {
      const server = await createServerDatabase();
      // The server itself: the migrator's statements need a session, not a pooler's transaction.
      const client = new pg.Client({ connectionString: server.directUrl ?? server.url });
      await client.connect();
      const drizzled = drizzlePg(client);
      db = drizzled as unknown as Db;
      migrate = (folder) => migratePg(drizzled, { migrationsFolder: folder });
      close = async () => {
        await client.end();
        await server.drop();
      };
    } else {
      const client = new PGlite();
      const drizzled = drizzlePglite(client);
      db = drizzled as unknown as Db;
      migrate = (folder) => migratePglite(drizzled, { migrationsFolder: folder });
      close = () => client.close();
    }
  });
  afterAll(async () => {
    await close();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it('0013: a change resolved before it without an outcome (its waiting replica died) gets UNCONFIRMED; others keep theirs (docs/rotation.md)', async () => {
    const before = folderUpTo('0012_webhook_claim_per_subscription');
    folders.push(before);
    await migrate(before);
    // The audit rows alone: their asset is not what the migration reads.
    await db.execute(sql`SET session_replication_role = replica`);
    await db.execute(sql`
      INSERT INTO asset_password_changes (id, asset_id, network, actor_client_id, generated, changed_at, outcome, resolution, resolved_at) VALUES
        ('apc_died_resolved', 'CP-1', 'net-a', 'cli_a', true, now(), NULL, 'NEW_USED', now()),
        ('apc_died_open', 'CP-2', 'net-a', 'cli_a', true, now(), NULL, NULL, NULL),
        ('apc_accepted', 'CP-3', 'net-a', 'cli_a', true, now(), 'ACCEPTED', NULL, NULL),
        ('apc_unconfirmed_resolved', 'CP-4', 'net-a', 'cli_a', true, now(), 'UNCONFIRMED', 'OLD_USED', now())`);
    await db.execute(sql`SET session_replication_role = DEFAULT`);

    await migrate(MIGRATIONS);
    const rows = await rowsOf<{ id: string; outcome: string | null; resolution: string | null }>(db, sql`SELECT id, outcome, resolution FROM asset_password_changes ORDER BY id`);
    expect(rows).toEqual([
      { id: 'apc_accepted', outcome: 'ACCEPTED', resolution: null },
      // Still waiting for its replica's answer or the sweep: left as it was.
      { id: 'apc_died_open', outcome: null, resolution: null },
      { id: 'apc_died_resolved', outcome: 'UNCONFIRMED', resolution: 'NEW_USED' },
      { id: 'apc_unconfirmed_resolved', outcome: 'UNCONFIRMED', resolution: 'OLD_USED' },
    ]);
  });
});
