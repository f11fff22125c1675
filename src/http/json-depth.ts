// How deeply a JSON body may nest objects and arrays. The deepest body any route accepts nests
// three levels; code that walks a parsed body recursively (the idempotency fingerprint, schema
// validation) needs a bound far below the stack's, which a few kilobytes of brackets exceed.
export const MAX_JSON_DEPTH = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

// The deepest nesting of objects and arrays in a JSON text, counted in one pass without recursion
// and without parsing: brackets inside strings do not count, and the count stops at limit + 1,
// the first depth that is too deep. Text that is not JSON gets some number; the parser refuses it.
// The text may be its UTF-8 bytes (an OCPP frame before it is decoded): every character counted
// here is ASCII, and no byte of a multi-byte character is one.
export function jsonNestingDepth(text: string | Uint8Array, limit: number): number {
  const codeAt = typeof text === 'string' ? (i: number) => text.charCodeAt(i) : (i: number) => text[i];
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = codeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return deepest;
}

// The opening brackets ('[' and '{') of a text, counted up to `cap` by native searches, strings
// included: a bound on its nesting that costs far less than reading it character by character.
export function openingBrackets(text: string | Uint8Array, cap: number): number {
  let count = 0;
  if (typeof text === 'string') {
    for (const open of ['[', '{']) for (let at = text.indexOf(open); at !== -1 && count < cap; at = text.indexOf(open, at + 1)) count++;
  } else {
    for (const open of [OPEN_BRACKET, OPEN_BRACE]) for (let at = text.indexOf(open); at !== -1 && count < cap; at = text.indexOf(open, at + 1)) count++;
  }
  return count;
}

// Whether a JSON text (or its UTF-8 bytes) nests objects and arrays deeper than `limit`. A text with
// at most `limit` opening brackets cannot, which is almost every OCPP frame and API body (a frame
// listing many components or samples has more), so only the others are scanned.
export function nestsDeeperThan(text: string | Uint8Array, limit: number): boolean {
  if (openingBrackets(text, limit + 1) <= limit) return false;
  return jsonNestingDepth(text, limit) > limit;
}
