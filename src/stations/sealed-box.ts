// A password on its way to the replica that holds the station crosses PostgreSQL's notification
// queue, which is written to disk: it goes sealed to that replica's key (X25519 with a one-time
// key of the sender, HKDF-SHA-256, AES-256-GCM). The additional data binds the box to one command,
// so a box cannot be replayed under another command, asset or deadline.
import { createCipheriv, createDecipheriv, createPublicKey, diffieHellman, generateKeyPairSync, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';

export interface SealedBox {
  // The sender's one-time public key, SPKI DER, base64.
  epk: string;
  iv: string;
  ct: string;
  tag: string;
}

export interface ReplicaKeys {
  // SPKI DER, base64: registered in station_replicas for the others to seal to.
  publicKey: string;
  privateKey: KeyObject;
}

export function makeReplicaKeys(): ReplicaKeys {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  return { publicKey: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'), privateKey };
}

const INFO = Buffer.from('cns station password v1');

function boxKey(privateKey: KeyObject, publicDer: Buffer, epkDer: Buffer): Buffer {
  const shared = diffieHellman({ privateKey, publicKey: createPublicKey({ key: publicDer, format: 'der', type: 'spki' }) });
  return Buffer.from(hkdfSync('sha256', shared, epkDer, INFO, 32));
}

export function seal(recipientPublicKey: string, plaintext: string, aad: string): SealedBox {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  const epk = publicKey.export({ format: 'der', type: 'spki' });
  const key = boxKey(privateKey, Buffer.from(recipientPublicKey, 'base64'), epk);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { epk: epk.toString('base64'), iv: iv.toString('base64'), ct: ct.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
}

// Throws when the box was not sealed to this key or was altered.
export function open(keys: ReplicaKeys, box: SealedBox, aad: string): string {
  const epk = Buffer.from(box.epk, 'base64');
  const key = boxKey(keys.privateKey, epk, epk);
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(box.iv, 'base64'));
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(Buffer.from(box.tag, 'base64'));
  return Buffer.concat([decipher.update(Buffer.from(box.ct, 'base64')), decipher.final()]).toString('utf8');
}
