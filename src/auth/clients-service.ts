import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Executor } from '../db/database.js';
import { canonicalText, describeProblem, identifierProblems, LISTED_ID } from '../kernel/identifiers.js';
import { newId } from '../kernel/ids.js';
import * as clients from './clients-repository.js';
import { SCOPES, isScope } from './scopes.js';

export interface NewClient {
  name: string;
  scopes: string[];
  network?: string | null | undefined;
  isAdmin?: boolean | undefined;
}

export interface CreatedClient {
  clientId: string;
  clientSecret: string;
  name: string;
  scopes: string[];
  network: string | null;
  isAdmin: boolean;
}

export class ClientInputError extends Error {}

// Client secrets are 256 random bits, so a fast hash is enough: a slow KDF protects guessable
// passwords, and would only make every token request (and a token flood) expensive.
function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

const DUMMY_HASH = hashSecret('no such client').toString('hex');

export function secretMatches(secret: string, storedHex: string): boolean {
  const expected = Buffer.from(storedHex, 'hex');
  const actual = hashSecret(secret);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

export async function createClient(db: Executor, input: NewClient): Promise<CreatedClient> {
  const name = input.name.trim();
  if (name.length === 0 || name.length > 200) throw new ClientInputError('name must be 1 to 200 characters');
  const unknown = input.scopes.filter((s) => !isScope(s));
  if (unknown.length > 0) throw new ClientInputError(`unknown scope(s): ${unknown.join(', ')}`);
  if (input.scopes.length === 0) throw new ClientInputError('at least one scope is required');
  // The same rules as the networks payments and assets are recorded with: a client scoped to a
  // network no record can carry would see nothing and could write nothing.
  const network = input.network === undefined || input.network === null ? null : canonicalText(input.network);
  const problem = network === null ? undefined : identifierProblems(network, LISTED_ID)[0];
  if (problem) throw new ClientInputError(`network ${describeProblem(problem, LISTED_ID.maxLength)}`);
  const clientId = newId('cli');
  const clientSecret = randomBytes(32).toString('base64url');
  const scopes = [...new Set(input.scopes)];
  await clients.insertClient(db, {
    id: clientId,
    name,
    secretHash: hashSecret(clientSecret).toString('hex'),
    scopes,
    network,
    isAdmin: input.isAdmin ?? false,
  });
  return { clientId, clientSecret, name, scopes, network, isAdmin: input.isAdmin ?? false };
}

export async function authenticateClient(db: Executor, clientId: string, secret: string): Promise<clients.ClientRow | null> {
  const row = await clients.findActiveClient(db, clientId);
  // Compare against a dummy hash for unknown ids so timing does not reveal which ids exist.
  const ok = secretMatches(secret, row?.secretHash ?? DUMMY_HASH);
  return row && ok ? row : null;
}

export async function listClients(db: Executor) {
  const rows = await clients.listClients(db);
  return rows.map((r) => ({
    clientId: r.id,
    name: r.name,
    scopes: r.scopes,
    network: r.network,
    isAdmin: r.isAdmin,
    createdAt: r.createdAt.toISOString(),
    revokedAt: r.revokedAt?.toISOString() ?? null,
  }));
}

export async function revokeClient(db: Executor, clientId: string): Promise<boolean> {
  return clients.revokeClient(db, clientId, new Date());
}

// First start with no clients: one admin client with every scope, so a new install is usable.
export async function createBootstrapClientIfNone(db: Executor): Promise<CreatedClient | null> {
  if ((await clients.countClients(db)) > 0) return null;
  return createClient(db, { name: 'bootstrap-admin', scopes: [...SCOPES], isAdmin: true });
}
