import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../src/db/database.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgliteSnapshot: string | null;
  }
}

// One migrated PGlite data directory for the whole run; every test database starts from a copy.
export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) {
    project.provide('pgliteSnapshot', null);
    return;
  }
  const database = await openDatabase({});
  await database.migrate();
  const snapshot = await database.dumpDataDir!();
  await database.close();
  const dir = mkdtempSync(join(tmpdir(), 'cns-pglite-'));
  const file = join(dir, 'migrated.tar');
  writeFileSync(file, Buffer.from(await snapshot.arrayBuffer()));
  project.provide('pgliteSnapshot', file);
  return () => rmSync(dir, { recursive: true, force: true });
}
