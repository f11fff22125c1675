// Rules for the identifiers and names the API takes, shared by both API families and their
// services. Pure: no I/O, no schema library.

export const MAX_ID_LENGTH = 128;

// The list endpoint splits `sessionIds` on this and trims each entry.
export const LIST_SEPARATOR = ',';

// Cc: C0/C1 controls (PostgreSQL text cannot hold a NUL). Cf: format characters (zero-width
// spaces and joiners, bidi overrides, soft hyphen, BOM): invisible, so an ID holding one looks
// like another ID that it is not. Cs: unpaired surrogates, which the drivers would store as
// U+FFFD, so what is read back would not be what was sent.
const FORBIDDEN_CHARACTER = /[\p{Cc}\p{Cf}\p{Cs}]/u;

export function hasForbiddenCharacter(s: string): boolean {
  return FORBIDDEN_CHARACTER.test(s);
}

// "Characters" are Unicode code points, as PostgreSQL's char_length and JSON Schema's maxLength
// count them; String#length counts UTF-16 units.
export function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

export function exceedsLength(s: string, max: number): boolean {
  // A string has at least half as many code points as UTF-16 units: most need no count.
  return s.length > max && codePointLength(s) > max;
}

export function exceedsIdLength(s: string): boolean {
  return exceedsLength(s, MAX_ID_LENGTH);
}

// One spelling for what Unicode calls the same text: "é" composed and "e" + U+0301 are one ID.
export function canonicalText(s: string): string {
  return s.normalize('NFC');
}

const NON_ASCII = /[\u0080-\uffff]/;

// Entries of a comma-separated list parameter as they are looked up: trimmed and canonical, so a
// client spelling a recorded ID in another normalisation form still finds it.
export function splitList(raw: string): string[] {
  const entries = raw.split(LIST_SEPARATOR);
  // ASCII text is in NFC already: one scan of the parameter instead of a normalisation per entry.
  if (!NON_ASCII.test(raw)) return entries.map((entry) => entry.trim());
  return entries.map((entry) => canonicalText(entry.trim()));
}

export type TextProblem = 'empty' | 'blank' | 'too_long' | 'forbidden_character' | 'outer_whitespace' | 'list_separator';

export interface IdentifierRule {
  maxLength: number;
  // The ID must be found again through a comma-separated, trimmed list.
  listed: boolean;
}

export const LISTED_ID: IdentifierRule = { maxLength: MAX_ID_LENGTH, listed: true };
export const UNLISTED_ID: IdentifierRule = { maxLength: MAX_ID_LENGTH, listed: false };

// An identifier is compared exactly, so it is refused rather than trimmed: "ses_1 " stored as
// "ses_1" would answer to a name its owner never sent. `value` is already canonical.
export function identifierProblems(value: string, rule: IdentifierRule): TextProblem[] {
  if (value === '') return ['empty'];
  const problems: TextProblem[] = [];
  if (exceedsLength(value, rule.maxLength)) problems.push('too_long');
  if (hasForbiddenCharacter(value)) problems.push('forbidden_character');
  if (value.trim() !== value) problems.push('outer_whitespace');
  if (rule.listed && value.includes(LIST_SEPARATOR)) problems.push('list_separator');
  return problems;
}

// Unicode White_Space: String#trim would also strip U+FEFF, a format character that is refused,
// not silently dropped.
const OUTER_WHITESPACE = /^\p{White_Space}+|\p{White_Space}+$/gu;

// A name is free text: outer whitespace (a pasted tab or newline included) is trimmed before it is
// stored, inner whitespace stays.
export function canonicalName(s: string): string {
  return canonicalText(s).replace(OUTER_WHITESPACE, '');
}

// `value` is already a canonicalName.
export function nameProblems(value: string, maxLength: number): TextProblem[] {
  if (value === '') return ['blank'];
  const problems: TextProblem[] = [];
  if (exceedsLength(value, maxLength)) problems.push('too_long');
  if (hasForbiddenCharacter(value)) problems.push('forbidden_character');
  return problems;
}

export function describeProblem(problem: TextProblem, maxLength: number): string {
  switch (problem) {
    case 'empty':
      return 'must not be empty';
    case 'blank':
      return 'must not be empty or only whitespace';
    case 'too_long':
      return `must be at most ${maxLength} characters`;
    case 'forbidden_character':
      return 'must not contain control characters, format characters (zero-width, bidi overrides, soft hyphen) or unpaired surrogates';
    case 'outer_whitespace':
      return 'must not start or end with whitespace';
    case 'list_separator':
      return `must not contain "${LIST_SEPARATOR}" (lists of IDs are comma-separated)`;
  }
}
