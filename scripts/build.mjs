// `npm run build`: compiles src/ to dist/, initialises the embedded database's template
// (dist/main/build-pglite-template.js), then writes dist/.build-stamp, a hash of everything the build
// read. `npm start` runs it with --if-changed: a checkout whose stamp still matches is not compiled
// again (tsc alone costs ~20 s of CPU). Plain JavaScript, so it runs before anything is compiled.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// What the output depends on: every file under src/, the compiler's settings, the locked
// dependencies (the compiler's version, PGlite's for the template) and this script. Contents,
// not modification times: a touched file builds nothing, a file put back with an old date does.
const INPUT_FOLDERS = ['src'];
const INPUT_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json', 'scripts/build.mjs'];
// Outputs a stamp alone does not prove present: one may have been deleted by hand.
const OUTPUTS = ['dist/server.js', 'dist/cli.js', 'dist/pglite-template/template.json'];
const STAMP = 'dist/.build-stamp';

// The inputs under root as [path, content] pairs, paths relative with '/', in a fixed order.
export function readInputs(root) {
  const files = [];
  const walk = (relative) => {
    for (const entry of readdirSync(join(root, relative), { withFileTypes: true })) {
      const path = `${relative}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) files.push(path);
    }
  };
  for (const folder of INPUT_FOLDERS) if (existsSync(join(root, folder))) walk(folder);
  for (const file of INPUT_FILES) if (existsSync(join(root, file))) files.push(file);
  return files.sort().map((path) => [path, readFileSync(join(root, path))]);
}

// One hash for a set of files: their paths and contents, whatever order they are given in. A
// file added, removed, renamed or changed gives another hash.
export function fingerprintOf(files) {
  const hash = createHash('sha256');
  for (const [path, content] of [...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    hash.update(`${path}\0${createHash('sha256').update(content).digest('hex')}\n`);
  }
  return hash.digest('hex');
}

// The staleness rule: build unless the last build's stamp names exactly these inputs and its
// outputs are all there.
export function needsBuild({ stamp, fingerprint, outputsPresent }) {
  return stamp !== fingerprint || !outputsPresent;
}

function run(root, args) {
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

function main(root, ifChanged) {
  const stampPath = join(root, STAMP);
  // Taken before compiling: a source edited while tsc runs leaves the stamp behind, so the next
  // start builds again.
  const fingerprint = fingerprintOf(readInputs(root));
  if (ifChanged) {
    const stamp = existsSync(stampPath) ? readFileSync(stampPath, 'utf8').trim() : null;
    const outputsPresent = OUTPUTS.every((output) => existsSync(join(root, output)));
    if (!needsBuild({ stamp, fingerprint, outputsPresent })) {
      process.stdout.write('build: dist/ is up to date with the sources, not compiling again\n');
      return;
    }
    process.stdout.write(stamp === null ? 'build: no earlier build, compiling\n' : 'build: the sources changed since the last build, compiling\n');
  }
  // A build cut short must not leave the previous stamp vouching for a half-written dist/.
  rmSync(stampPath, { force: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  run(root, [tsc, '-p', 'tsconfig.build.json']);
  run(root, ['dist/main/build-pglite-template.js']);
  writeFileSync(stampPath, `${fingerprint}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(fileURLToPath(new URL('..', import.meta.url)), process.argv.includes('--if-changed'));
}
