// Types of build.mjs's pure parts, for the tests that check its staleness rule.
export function readInputs(root: string): [path: string, content: Buffer][];
export function fingerprintOf(files: readonly (readonly [path: string, content: Buffer | string])[]): string;
export function needsBuild(state: { stamp: string | null; fingerprint: string; outputsPresent: boolean }): boolean;
