// `npm start` compiles only when the checkout changed since the last build (scripts/build.mjs).
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { fingerprintOf, needsBuild, readInputs } from '../../scripts/build.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

// Distinct paths with their contents.
const fileSets = fc.uniqueArray(fc.tuple(fc.stringMatching(/^[a-z]{1,8}(\/[a-z]{1,8}){0,2}\.ts$/), fc.string()), {
  minLength: 1,
  maxLength: 8,
  selector: ([path]) => path,
});

describe('the build stamp', () => {
  it('is the same for the same files in any order', () => {
    fc.assert(
      fc.property(fileSets, (files) => {
        expect(fingerprintOf([...files].reverse())).toBe(fingerprintOf(files));
      }),
    );
  });

  it('changes when any one file changes, appears, disappears or is renamed', () => {
    fc.assert(
      fc.property(fileSets, fc.nat(), fc.string({ minLength: 1 }), (files, at, extra) => {
        const before = fingerprintOf(files);
        const i = at % files.length;
        const [path, content] = files[i]!;
        const others = files.filter((_, j) => j !== i);
        expect(fingerprintOf([...others, [path, `${content}${extra}`]])).not.toBe(before);
        expect(fingerprintOf(others)).not.toBe(before);
        expect(fingerprintOf([...files, [`${path}.new.ts`, '']])).not.toBe(before);
        expect(fingerprintOf([...others, [`${path}.moved.ts`, content]])).not.toBe(before);
      }),
    );
  });

  it('asks for a build unless the last build stamped exactly these inputs and its outputs are there', () => {
    fc.assert(
      fc.property(fc.option(fc.constantFrom('a1', 'b2', 'c3')), fc.constantFrom('a1', 'b2', 'c3'), fc.boolean(), (stamp, fingerprint, outputsPresent) => {
        expect(needsBuild({ stamp, fingerprint, outputsPresent })).toBe(stamp !== fingerprint || !outputsPresent);
      }),
    );
    expect(needsBuild({ stamp: 'abc', fingerprint: 'abc', outputsPresent: true })).toBe(false);
    expect(needsBuild({ stamp: null, fingerprint: 'abc', outputsPresent: true })).toBe(true);
  });
});

describe('the inputs of a build', () => {
  let root: string | undefined;
  afterEach(() => {
    if (root) rmSync(root, { recursive: true, force: true });
    root = undefined;
  });

  function project(files: Record<string, string>): string {
    root = mkdtempSync(join(tmpdir(), 'cns-build-'));
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
    return root;
  }

  it('a changed source means a rebuild; an unchanged or merely touched checkout means none', () => {
    const dir = project({
      'src/server.ts': 'export {};\n',
      'src/db/database.ts': 'export const a = 1;\n',
      'tsconfig.json': '{}',
      'tsconfig.build.json': '{}',
      'package.json': '{}',
      'package-lock.json': '{}',
      'README.md': '# x\n',
      'test/a.test.ts': '',
    });
    const stamped = fingerprintOf(readInputs(dir));
    const current = () => !needsBuild({ stamp: stamped, fingerprint: fingerprintOf(readInputs(dir)), outputsPresent: true });

    expect(current()).toBe(true);
    utimesSync(join(dir, 'src/db/database.ts'), new Date(), new Date(Date.now() + 60_000));
    expect(current()).toBe(true);
    // What the build does not read changes nothing.
    writeFileSync(join(dir, 'README.md'), '# y\n');
    writeFileSync(join(dir, 'test/a.test.ts'), 'changed');
    expect(current()).toBe(true);

    for (const [path, content] of [
      ['src/db/database.ts', 'export const a = 2;\n'],
      ['package-lock.json', '{"lockfileVersion":3}'],
      ['tsconfig.build.json', '{"compilerOptions":{}}'],
      ['src/new-module.ts', 'export {};\n'],
    ] as const) {
      const original = readInputs(dir).find(([p]) => p === path)?.[1];
      writeFileSync(join(dir, path), content);
      expect(current(), path).toBe(false);
      if (original) writeFileSync(join(dir, path), original);
      else rmSync(join(dir, path));
      expect(current(), `${path} put back`).toBe(true);
    }
  });

  it('of this repository: its sources, compiler settings and locked dependencies', () => {
    const paths = readInputs(REPO).map(([path]) => path);
    expect(paths).toEqual(expect.arrayContaining(['src/server.ts', 'src/db/database.ts', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json']));
    expect(paths.filter((p) => !p.startsWith('src/'))).toEqual(['package-lock.json', 'package.json', 'scripts/build.mjs', 'tsconfig.build.json', 'tsconfig.json']);
  });
});
