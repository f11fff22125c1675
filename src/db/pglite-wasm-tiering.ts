// Keeps V8 from re-compiling the embedded database's WebAssembly with its optimising compiler on
// the Node versions where that costs more memory than a small container has. From Node 24 on
// (V8 13), optimising one of PostgreSQL's largest functions, which runs hot within seconds of the
// first start, holds about 600 MB of compiler memory for a second and a half: the process peaked
// near 900 MB and a 512 MB container was killed; on Node 20 and 22 the same start peaks below
// 300 MB. PGlite's code then runs as V8's baseline compiler made it, at some cost in CPU per
// query; docs/performance.md has the figures.
import { setFlagsFromString } from 'node:v8';

// The newest Node major measured without the peak; later ones are treated as having it.
const LAST_UNAFFECTED_NODE_MAJOR = 22;

// Read by V8 when a WebAssembly module is compiled, so they hold for the module PGlite compiles
// after this (PGlite reuses its compiled module for every later instance in the process). Both
// are needed: without dynamic tiering V8 would optimise every function at once instead. V8's
// `--liftoff-only` has no effect when set after start-up, these two do.
const FLAGS = ['--no-wasm-dynamic-tiering', '--no-wasm-tier-up'];

// An operator who starts Node with a tiering flag of their own (`node --wasm-dynamic-tiering
// dist/server.js`, with the memory to spare) keeps it.
const OPERATOR_FLAG = /--(no-)?(wasm[-_]dynamic[-_]tiering|wasm[-_]tier[-_]up|liftoff)\b/;

export function needsBaselineWasm(nodeVersion: string, startFlags: readonly string[]): boolean {
  const major = Number(/^v?(\d+)\./.exec(nodeVersion)?.[1]);
  if (!(major > LAST_UNAFFECTED_NODE_MAJOR)) return false;
  return !startFlags.some((flag) => OPERATOR_FLAG.test(flag));
}

let applied = false;

// Called before the first PGlite of the process is created.
export function limitPgliteWasmTiering(): void {
  if (applied) return;
  applied = true;
  const startFlags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  if (!needsBaselineWasm(process.version, startFlags)) return;
  for (const flag of FLAGS) setFlagsFromString(flag);
}
