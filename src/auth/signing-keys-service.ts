import { createHash, generateKeyPairSync } from 'node:crypto';
import type { Executor } from '../db/database.js';
import { insertSigningKey, listVerificationKeys, type SigningKeyRow } from './signing-keys-repository.js';

// RFC 7638 thumbprint: a stable kid derived from the public key itself.
function thumbprint(jwk: Record<string, string>): string {
  const members =
    jwk.kty === 'EC'
      ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }
      : { e: jwk.e, kty: jwk.kty, n: jwk.n };
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}

function generate(alg: 'ES256' | 'RS256') {
  const pair =
    alg === 'ES256'
      ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : generateKeyPairSync('rsa', { modulusLength: 2048 });
  const publicJwk = pair.publicKey.export({ format: 'jwk' }) as Record<string, string>;
  const privateJwk = pair.privateKey.export({ format: 'jwk' }) as Record<string, string>;
  const kid = thumbprint(publicJwk);
  return { kid, alg, publicJwk: { ...publicJwk, kid, alg, use: 'sig' }, privateJwk };
}

// Called under the start-up lock, so concurrent replicas never create two active keys.
export async function ensureSigningKey(db: Executor, alg: 'ES256' | 'RS256'): Promise<SigningKeyRow> {
  const existing = (await listVerificationKeys(db)).find((k) => k.alg === alg);
  if (existing) return existing;
  const key = generate(alg);
  return insertSigningKey(db, key);
}

// The public halves of the keys that sign and may still verify tokens, as a JWKS document.
export async function publishedJwks(db: Executor) {
  return { keys: (await listVerificationKeys(db)).map((r) => r.publicJwk) };
}
