// Entity tags and If-None-Match (RFC 9110 §8.8.3, §13.1.2).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { etagOf, noneMatch } from '../../src/http/conditional-requests.js';

describe('etagOf', () => {
  it('is a weak tag of the exact bytes before any content coding: the same bytes the same tag, other bytes another', () => {
    expect(etagOf('{"a":1}')).toMatch(/^W\/"[A-Za-z0-9_-]{22}"$/);
    expect(etagOf('{"a":1}')).toBe(etagOf(Buffer.from('{"a":1}')));
    expect(etagOf('{"a":1}')).not.toBe(etagOf('{"a": 1}'));
  });
});

describe('noneMatch', () => {
  const tag = etagOf('body');

  it('runs the request without the header or when no listed tag matches', () => {
    expect(noneMatch(undefined, tag)).toBe(true);
    expect(noneMatch('"other"', tag)).toBe(true);
    expect(noneMatch('', tag)).toBe(true);
    expect(noneMatch('not a tag', tag)).toBe(true);
  });

  it('answers 304 for the tag, its weak form, a list holding it, and *', () => {
    expect(noneMatch(tag, tag)).toBe(false);
    expect(noneMatch(`W/${tag}`, tag)).toBe(false);
    expect(noneMatch(`"a", W/"b",${tag} , "c"`, tag)).toBe(false);
    expect(noneMatch('*', tag)).toBe(false);
    expect(noneMatch(' * ', tag)).toBe(false);
  });

  it('compares weakly whatever other tags the list holds', () => {
    fc.assert(
      fc.property(fc.array(fc.stringMatching(/^[A-Za-z0-9_-]{1,30}$/), { maxLength: 5 }), fc.nat(5), fc.boolean(), (others, at, weak) => {
        const list = others.filter((o) => `"${o}"` !== tag).map((o) => `"${o}"`);
        expect(noneMatch(list.join(', ') || undefined, tag)).toBe(true);
        list.splice(Math.min(at, list.length), 0, weak ? `W/${tag}` : tag);
        expect(noneMatch(list.join(', '), tag)).toBe(false);
      }),
    );
  });
});
