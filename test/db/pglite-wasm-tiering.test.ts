// Which Node versions keep the embedded database's WebAssembly on V8's baseline compiler (the
// memory it saves is checked by test/e2e/start-memory.test.ts).
import { describe, expect, it } from 'vitest';
import { needsBaselineWasm } from '../../src/db/pglite-wasm-tiering.js';

describe('the embedded database on V8 baseline WebAssembly only', () => {
  it('applies after Node 22 (on Node 24 optimising PGlite peaked near 900 MB), not on Node 20 and 22', () => {
    expect(['v20.20.2', 'v22.23.0', 'v23.0.0', 'v24.9.0', 'v24.21.0', 'v26.1.0'].map((v) => needsBaselineWasm(v, []))).toEqual([false, false, true, true, true, true]);
  });

  it('leaves the tiering flags an operator started Node with alone', () => {
    expect(needsBaselineWasm('v24.21.0', ['--wasm-dynamic-tiering'])).toBe(false);
    expect(needsBaselineWasm('v24.21.0', ['--no-wasm-tier-up'])).toBe(false);
    expect(needsBaselineWasm('v24.21.0', ['--liftoff-only'])).toBe(false);
    expect(needsBaselineWasm('v24.21.0', ['--max-old-space-size=256', '--enable-source-maps'])).toBe(true);
  });
});
