// Entity tags and If-None-Match (RFC 9110 §8.8.3, §13.1.2). Pure.
import { createHash } from 'node:crypto';

// A tag of the exact bytes of a body before any content coding: 128 bits of its SHA-256,
// base64url. Weak, because the same tag goes out with the identity, gzip and brotli encodings of
// one body, which a strong tag may not (RFC 9110 §8.8.1); If-None-Match compares weakly anyway.
export function etagOf(body: string | Buffer): string {
  return `W/"${createHash('sha256').update(body).digest().subarray(0, 16).toString('base64url')}"`;
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
