// The pure rules of src/kernel/identifiers.ts, for all inputs.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  LISTED_ID,
  canonicalName,
  canonicalText,
  codePointLength,
  identifierProblems,
  nameProblems,
  splitList,
  type IdentifierRule,
} from '../../src/kernel/identifiers.js';

const FORMAT_CHARACTERS = ['\u00ad', '\u061c', '\u200b', '\u200c', '\u200d', '\u200e', '\u202a', '\u202e', '\u2066', '\ufeff', '\u{e0001}'];

// Characters chosen to meet the rules' edges often: whitespace of several kinds, the separator,
// controls, format characters, lone surrogates, and letters that compose or decompose under NFC
// (é, e + U+0301, Hangul jamo, U+2000 which NFC turns into U+2002).
const char = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.constantFrom('a', 'Z', '0', '_', 'é', 'e', '\u0301', '\u0327', '\u1100', '\u1161', '\u11a8', 'Å', '\u212b', '\u2000') },
  { weight: 2, arbitrary: fc.constantFrom(' ', '\t', '\n', '\u00a0', '\u2003', '\u3000', '\u2028', ',', '\u0000', '\u007f', '\u0085') },
  { weight: 1, arbitrary: fc.constantFrom(...FORMAT_CHARACTERS) },
  { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((u) => String.fromCharCode(u)) },
);
const text = fc.array(char, { maxLength: 14 }).map((chars) => chars.join(''));
const rule = fc.record({ maxLength: fc.integer({ min: 1, max: 12 }), listed: fc.boolean() });

const CONTROL_OR_FORMAT = /[\p{Cc}\p{Cf}]/u;

// No unpaired surrogate (Cs), checked code unit by code unit rather than with the rule's own regex.
function isWellFormedUtf16(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const u = s.charCodeAt(i);
    if (u >= 0xd800 && u <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (u >= 0xdc00 && u <= 0xdfff) {
      return false;
    }
  }
  return true;
}

function expectStorable(value: string, maxLength: number) {
  expect(isWellFormedUtf16(value)).toBe(true);
  expect(CONTROL_OR_FORMAT.test(value)).toBe(false);
  expect(value).toBe(value.trim());
  expect(value).toBe(value.normalize('NFC'));
  expect(codePointLength(value)).toBeGreaterThanOrEqual(1);
  expect(codePointLength(value)).toBeLessThanOrEqual(maxLength);
}

describe('identifiers', () => {
  it('an accepted identifier is well-formed, free of Cc and Cf, trimmed, NFC and within its length', () => {
    fc.assert(
      fc.property(text, rule, (raw, r: IdentifierRule) => {
        const value = canonicalText(raw);
        if (identifierProblems(value, r).length > 0) return;
        expectStorable(value, r.maxLength);
        if (r.listed) expect(value).not.toContain(',');
      }),
      { numRuns: 3000 },
    );
  });

  it('an accepted listed identifier is found again by the list in any spelling it may be sent in', () => {
    fc.assert(
      fc.property(text, fc.constantFrom('', ' ', '\t', '\u00a0'), (raw, pad) => {
        const value = canonicalText(raw);
        if (identifierProblems(value, LISTED_ID).length > 0) return;
        for (const spelling of [value, value.normalize('NFD'), `${pad}${value.normalize('NFD')}${pad}`]) {
          expect(splitList(spelling)).toEqual([value]);
          expect(splitList(`x,${spelling}`)).toEqual(['x', value]);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('splits any list, ASCII or not, into its entries trimmed and in NFC', () => {
    const list = fc.array(fc.oneof(text, fc.string({ unit: 'binary-ascii' })), { maxLength: 5 }).map((parts) => parts.join(','));
    fc.assert(
      fc.property(list, (raw) => {
        expect(splitList(raw)).toEqual(raw.split(',').map((entry) => entry.trim().normalize('NFC')));
      }),
      { numRuns: 3000 },
    );
  });

  it('a control or format character anywhere refuses the identifier', () => {
    fc.assert(
      fc.property(text, fc.constantFrom(...FORMAT_CHARACTERS, '\u0000', '\u0085', '\n'), text, rule, (before, c, after, r) => {
        expect(identifierProblems(canonicalText(`${before}${c}${after}`), r)).not.toEqual([]);
      }),
    );
  });

  it('canonical forms are idempotent', () => {
    fc.assert(
      fc.property(text, (raw) => {
        expect(canonicalText(canonicalText(raw))).toBe(canonicalText(raw));
        expect(canonicalName(canonicalName(raw))).toBe(canonicalName(raw));
      }),
    );
  });
});

describe('names', () => {
  it('an accepted name is well-formed, free of Cc and Cf, trimmed, NFC and within its length', () => {
    fc.assert(
      fc.property(text, fc.integer({ min: 1, max: 12 }), (raw, maxLength) => {
        const value = canonicalName(raw);
        if (nameProblems(value, maxLength).length > 0) return;
        expectStorable(value, maxLength);
      }),
      { numRuns: 3000 },
    );
  });

  it('a format character or a control character other than whitespace anywhere refuses the name, even at its ends', () => {
    fc.assert(
      fc.property(text, fc.constantFrom(...FORMAT_CHARACTERS, '\u0000', '\u007f'), text, (before, c, after) => {
        expect(nameProblems(canonicalName(`${before}${c}${after}`), 200)).toContain('forbidden_character');
      }),
    );
  });

  it('inner spaces and commas stay in a name; outer whitespace, a tab or newline included, is trimmed', () => {
    expect(canonicalName('\t Bay 1\r\n')).toBe('Bay 1');
    expect(canonicalName(`  Caf${'e\u0301'}, bay 1\u3000`)).toBe('Café, bay 1');
    expect(nameProblems('Café, bay 1', 11)).toEqual([]);
    expect(nameProblems('Café, bay 1', 10)).toEqual(['too_long']);
  });
});
