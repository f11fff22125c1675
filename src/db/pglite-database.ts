import { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { folderProblem, lockDataDir, type DataDirHolder } from './data-dir-lock.js';
import type { Database, Db } from './database.js';
import { PING_TIMEOUT_MS, withDeadline } from './deadline.js';
import { PGLITE_INITDB_PARAMS, PGLITE_START_PARAMS, seedFromTemplate } from './pglite-template.js';
import { limitPgliteWasmTiering } from './pglite-wasm-tiering.js';
import { pgliteStartupWork } from './startup-lock.js';

export async function openPglite(
  dataDir: string | undefined,
  { snapshot, templateDir, holder }: { snapshot: Blob | undefined; templateDir: string; holder: DataDirHolder },
): Promise<Database> {
  const lock = dataDir ? lockDataDir(dataDir, holder, (line) => process.stderr.write(`${line}\n`)) : undefined;
  let client: PGlite;
  try {
    const settings = { startParams: PGLITE_START_PARAMS, initDbStartParams: PGLITE_INITDB_PARAMS };
    if (dataDir) {
      try {
        seedFromTemplate(dataDir, templateDir);
      } catch (error) {
        throw folderProblem(dataDir, error);
      }
    }
    limitPgliteWasmTiering();
    client = dataDir ? new PGlite(dataDir, settings) : new PGlite({ ...settings, ...(snapshot ? { loadDataDir: snapshot } : {}) });
    await client.waitReady;
  } catch (error) {
    lock?.release();
    // PGlite reports file system failures as bare errno objects ("[object Object]" as text).
    throw dataDir && !(error instanceof Error) ? folderProblem(dataDir, error) : error;
  }
  const db = drizzlePglite(client);
  return {
    db: db as unknown as Db,
    kind: 'pglite',
    async ping() {
      // One connection, one statement at a time: the probe queues behind the requests' statements.
      await withDeadline(client.query('select 1'), PING_TIMEOUT_MS);
    },
    ...pgliteStartupWork(db),
    async close() {
      try {
        if (!client.closed) await client.close();
      } finally {
        lock?.release();
      }
    },
    async dumpDataDir() {
      return client.dumpDataDir('none');
    },
  };
}
