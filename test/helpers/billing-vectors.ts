import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The worked billing cases are a design document beside the repository (shared/design). A clone
// on its own has no shared/ folder, so the repository keeps a byte-for-byte copy; wherever the
// original is present (CI, the team's machines) the copy must still equal it.
const committedCopy = fileURLToPath(new URL('../fixtures/billing-vectors.json', import.meta.url));

export function sharedVectorsPath(): string | null {
  const candidates = [
    process.env.SHARED_DIR && path.join(process.env.SHARED_DIR, 'design', 'billing-vectors.json'),
    fileURLToPath(new URL('../../../shared/design/billing-vectors.json', import.meta.url)),
  ].filter((p): p is string => Boolean(p));
  return candidates.find((p) => fs.existsSync(p)) ?? null;
}

export function readVectorsText(): { text: string; source: string } {
  const shared = sharedVectorsPath();
  const source = shared ?? committedCopy;
  return { text: fs.readFileSync(source, 'utf8'), source };
}

export function committedCopyText(): string {
  return fs.readFileSync(committedCopy, 'utf8');
}

export function loadVectors<T>(): T[] {
  return JSON.parse(readVectorsText().text) as T[];
}
