// The embedded database's first start copies a data directory initialised at build time instead
// of running initdb (whose memory peak killed a 512 MB container). What each start costs in
// memory is measured by `npm run bench -- --memory`; here: the copy is a working database of its
// own, a copy cut short is completed, and a template that is not this PGlite's is left alone.
import { appendFileSync, cpSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, sql } from '../../src/db/database.js';
import { createPgliteTemplate, isUsableTemplate, seedFromTemplate } from '../../src/db/pglite-template.js';

const folders: string[] = [];
function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cns-template-'));
  folders.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

async function scalar(database: Awaited<ReturnType<typeof openDatabase>>, text: string): Promise<unknown> {
  const result = (await database.db.execute(sql.raw(text))) as unknown as { rows: Record<string, unknown>[] };
  return Object.values(result.rows[0]!)[0];
}

describe('the pre-initialised data directory of the embedded database', () => {
  let template: string;
  // A file initdb never makes: found in a data directory, it came from this template.
  const MARK = 'copied-from-template';

  beforeAll(async () => {
    template = join(folder(), 'template');
    await createPgliteTemplate(template);
    writeFileSync(join(template, 'data', MARK), '');
  }, 120_000);

  it('is copied into an empty DATA_DIR, which then holds a database of its own that later starts reopen', { timeout: 60_000 }, async () => {
    const dataDir = join(folder(), 'data');
    const first = await openDatabase({ dataDir, pgliteTemplateDir: template });
    try {
      await first.migrate();
      expect(existsSync(join(dataDir, MARK))).toBe(true);
      expect(await scalar(first, 'SHOW shared_buffers')).toBe('16MB');
      await first.db.execute(sql.raw('CREATE TABLE kept (v text)'));
      await first.db.execute(sql.raw("INSERT INTO kept VALUES ('written on the first start')"));
    } finally {
      await first.close();
    }
    // Like initdb's: the database's files are the running user's alone.
    expect(statSync(join(dataDir, 'PG_VERSION')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, 'base')).mode & 0o777).toBe(0o700);

    const second = await openDatabase({ dataDir, pgliteTemplateDir: template });
    try {
      expect(await scalar(second, 'SELECT v FROM kept')).toBe('written on the first start');
    } finally {
      await second.close();
    }
  });

  it('is copied again over a copy cut short (no PG_VERSION yet), never over a database; the settings hold whatever its postgresql.conf says', { timeout: 60_000 }, async () => {
    const dataDir = join(folder(), 'data');
    cpSync(join(template, 'data', 'base'), join(dataDir, 'base'), { recursive: true });
    expect(seedFromTemplate(dataDir, template)).toBe(true);
    expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(true);
    expect(seedFromTemplate(dataDir, template)).toBe(false);
    // As in a folder made before the settings were the service's: they are passed at every start.
    appendFileSync(join(dataDir, 'postgresql.conf'), '\nshared_buffers = 128MB\n');

    const database = await openDatabase({ dataDir, pgliteTemplateDir: template });
    try {
      await database.migrate();
      expect(await scalar(database, "SELECT count(*)::int FROM information_schema.tables WHERE table_name = 'session_payments'")).toBe(1);
      expect(await scalar(database, 'SHOW shared_buffers')).toBe('16MB');
    } finally {
      await database.close();
    }
  });

  it('of another PGlite release or other settings, or half made, is not used', () => {
    const other = join(folder(), 'template');
    cpSync(template, other, { recursive: true });
    writeFileSync(join(other, 'template.json'), JSON.stringify({ pglite: '0.0.1', initdb: [] }));
    const dataDir = join(folder(), 'data');
    expect(isUsableTemplate(other)).toBe(false);
    expect(seedFromTemplate(dataDir, other)).toBe(false);
    expect(existsSync(join(dataDir, MARK))).toBe(false);

    rmSync(join(other, 'template.json'));
    expect(isUsableTemplate(other)).toBe(false);
    expect(isUsableTemplate(join(folder(), 'missing'))).toBe(false);
    expect(isUsableTemplate(template)).toBe(true);
  });
});
