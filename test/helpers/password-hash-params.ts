import type { Argon2Params } from '../../src/asset-management/password-hashing.js';

// argon2id at its smallest cost: tests of supplied passwords need not spend ~80 ms a hash. The
// verifier reads the parameters from the stored hash, so these hashes verify like production ones.
export const CHEAP_HASH: Argon2Params = Object.freeze({ memoryKiB: 64, iterations: 1, parallelism: 1, hashLength: 32, saltLength: 16 });
