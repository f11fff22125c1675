// Entity tags and If-None-Match (RFC 9110 §8.8.3, §13.1.2). Pure.
import { createHash } from 'node:crypto';

// A strong tag of the exact bytes of a body: 128 bits of its SHA-256, base64url.
export function etagOf(body: string | Buffer): string {
  return `"${createHash('sha256').update(body).digest().subarray(0, 16).toString('base64url')}"`;
}

const ENTITY_TAG = /(?:W\/)?"([\x21\x23-\x7E\x80-\xFF]*)"/g;

// Whether a GET with this If-None-Match header should run (true) or be answered 304 (false),
// for a current representation tagged `etag`. The comparison is weak (§8.8.3.2: W/"x" matches
// "x"); "*" matches any current representation; a header without a well-formed tag matches
// nothing, so the request runs as if the header were absent.
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return true;
  if (header.trim() === '*') return false;
  const opaque = etag.replace(/^W\//, '');
  for (const match of header.matchAll(ENTITY_TAG)) if (`"${match[1]}"` === opaque) return false;
  return true;
}
