// The embedded database's first start without initdb. PGlite's own initdb runs a second PostgreSQL
// instance beside the first and keeps a copy of its whole WASM heap, so an empty data directory
// made the process peak near 1 GB (about 700 MB even with the small settings below), and WASM
// memory never shrinks. A data directory initialised at build time (`npm run build` writes it
// to dist/pglite-template) is copied into an empty DATA_DIR instead, and PGlite then opens it as
// it opens any existing one.
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { limitPgliteWasmTiering } from './pglite-wasm-tiering.js';

// PostgreSQL settings of the embedded database. shared_buffers is allocated (and touched) inside
// PGlite's WASM heap, which is the process's own memory: PGlite's default of 128 MB held about
// 150 MB of RSS before the first query. The operating system's page cache still keeps the data
// files, so the smaller pool costs a read call into Node's fs, not a disk access.
const SETTINGS: Record<string, string> = {
  shared_buffers: '16MB',
};

const SETTING_FLAGS = Object.entries(SETTINGS).flatMap(([name, value]) => ['-c', `${name}=${value}`]);

// Every start passes them, so a data directory made before they changed follows them too.
export const PGLITE_START_PARAMS = [...PGlite.defaultStartParams, ...SETTING_FLAGS];
// initdb writes them into postgresql.conf, and uses them for its own runs of PostgreSQL.
export const PGLITE_INITDB_PARAMS = SETTING_FLAGS;

// dist/pglite-template, from src/db (tsx) and from dist/db (compiled) alike.
export const DEFAULT_TEMPLATE_DIR = fileURLToPath(new URL('../../dist/pglite-template', import.meta.url));
const DATA = 'data';
const MANIFEST = 'template.json';
// PostgreSQL's marker of an initialised data directory: copied last, so a copy cut short is
// copied again at the next start rather than opened half-made.
const PG_VERSION = 'PG_VERSION';

interface Manifest {
  pglite: string;
  initdb: string[];
}

// A template is only used by the PGlite build (and with the initdb settings) that made it: the
// catalog of another release would not open.
function currentManifest(): Manifest {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  const pkg = JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version: string };
  return { pglite: pkg.version, initdb: PGLITE_INITDB_PARAMS };
}

function readManifest(templateDir: string): Manifest | null {
  try {
    return JSON.parse(readFileSync(join(templateDir, MANIFEST), 'utf8')) as Manifest;
  } catch {
    return null;
  }
}

export function isUsableTemplate(templateDir: string): boolean {
  const manifest = readManifest(templateDir);
  return manifest !== null && JSON.stringify(manifest) === JSON.stringify(currentManifest()) && existsSync(join(templateDir, DATA, PG_VERSION));
}

// Runs initdb (through PGlite) into templateDir, replacing what is there. The work happens in a
// folder beside it, renamed into place at the end: a build cut short leaves no template at all.
export async function createPgliteTemplate(templateDir: string): Promise<void> {
  const work = `${templateDir}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  limitPgliteWasmTiering();
  const client = new PGlite(join(work, DATA), { startParams: PGLITE_START_PARAMS, initDbStartParams: PGLITE_INITDB_PARAMS });
  await client.waitReady;
  await client.close();
  // Readable by any user: the image builds it as root and runs as uid 1000.
  makeReadable(work);
  writeFileSync(join(work, MANIFEST), `${JSON.stringify(currentManifest(), null, 2)}\n`);
  rmSync(templateDir, { recursive: true, force: true });
  try {
    renameSync(work, templateDir);
  } catch (error) {
    // Another build made it between the two calls: theirs is as good as ours.
    rmSync(work, { recursive: true, force: true });
    if (!isUsableTemplate(templateDir)) throw error;
  }
}

function makeReadable(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) makeReadable(path);
    else chmodSync(path, 0o644);
  }
}

// Copies the template into dataDir when dataDir holds no database yet. Returns false when there is
// nothing to do or no usable template (PGlite then runs initdb itself). The copy gets the modes
// initdb gives: the folders and files are the running user's alone.
export function seedFromTemplate(dataDir: string, templateDir: string): boolean {
  if (existsSync(join(dataDir, PG_VERSION)) || !isUsableTemplate(templateDir)) return false;
  const source = join(templateDir, DATA);
  copyTree(source, dataDir, (name) => name !== PG_VERSION);
  copyFileSync(join(source, PG_VERSION), join(dataDir, PG_VERSION));
  chmodSync(join(dataDir, PG_VERSION), 0o600);
  return true;
}

// Not Node's recursive mkdir: its parent always exists here, and a copy cut short left some.
function makeDir(path: string): void {
  try {
    mkdirSync(path, 0o700);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  chmodSync(path, 0o700);
}

function copyTree(from: string, to: string, include: (name: string) => boolean): void {
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (!include(entry.name)) continue;
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) {
      makeDir(target);
      copyTree(source, target, () => true);
    } else {
      copyFileSync(source, target);
      chmodSync(target, 0o600);
    }
  }
}
