// What of a request's URL may reach a log line. URLs are logged whole, so any parameter, in the
// query or in a path segment (`/a;name=value`), whose name looks like it carries a credential is
// masked: clients put secrets where they should not, under names this service does not know.

const REDACTED = '[redacted]';

// Fragments of a name, once folded (see foldName), that mark a credential. Over-masking costs a
// log reader a value; under-masking leaks a secret, so the fragments are short ("key" masks
// "monkey" too). "session" is not one: the payments list's `sessionIds` names charging sessions.
const SECRET_FRAGMENTS = ['pass', 'pwd', 'secret', 'token', 'key', 'auth', 'credential', 'signature', 'jwt', 'bearer', 'cookie', 'hash', 'sessid', 'sessionid'];
// Names that are credentials whole but too short to look for inside others.
const SECRET_NAMES = new Set(['sig', 'sid', 'session', 'otp', 'pin']);
const SECRET_FRAGMENT = new RegExp(SECRET_FRAGMENTS.join('|'));

// The names the payments list reads: kept readable although "sessionids" contains "sessionid".
const KNOWN_NAMES = new Set(['sessionids']);

// Decoding stops after this many rounds: a name encoded more often than that is masked.
const MAX_DECODINGS = 4;

// One round of percent-decoding that never fails: each run of escapes is read as UTF-8 (invalid
// bytes become U+FFFD) and a `%` that starts no escape stays, the way a lenient decoder reads it.
function decodeOnce(text: string): string {
  return text.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));
}

// `text` percent-decoded as often as it was encoded; null when it still changes after
// MAX_DECODINGS rounds.
function decodeFully(text: string): string | null {
  let current = text;
  for (let round = 0; round < MAX_DECODINGS; round++) {
    const decoded = decodeOnce(current);
    if (decoded === current) return current;
    current = decoded;
  }
  return decodeOnce(current) === current ? current : null;
}

// A name as a reader would see it: decoded, `+` as a space, compatibility forms (fullwidth
// letters) folded, lower case, and only letters and digits kept, so `client_secret[]`,
// `Client-Secret`, `client%5Fsecret` and `ｓｅｃｒｅｔ` all fold alike.
function foldName(raw: string): string | null {
  const name = decodeFully(raw.replace(/\+/g, ' '));
  return name === null ? null : name.normalize('NFKC').toLowerCase().replace(/[^a-z0-9]/g, '');
}

// Whether a parameter of this (raw, maybe percent-encoded) name has its value masked in logs.
export function isSecretParameterName(raw: string): boolean {
  const name = foldName(raw);
  if (name === null) return true;
  if (KNOWN_NAMES.has(name)) return false;
  return SECRET_NAMES.has(name) || SECRET_FRAGMENT.test(name);
}

// Masks the values of the secret-named parameters in `text` (`name=value` pieces between `&`, `;`,
// `#` or a stray `?`), keeping everything else byte for byte, separators and repeated names included.
function maskParameters(text: string): string {
  return text.replace(/[^&;#?]+/g, (piece) => {
    const eq = piece.indexOf('=');
    if (eq < 0) return piece;
    return isSecretParameterName(piece.slice(0, eq)) ? `${piece.slice(0, eq)}=${REDACTED}` : piece;
  });
}

// The path with every segment's `;name=value` parameters masked.
function maskPath(path: string): string {
  return path
    .split('/')
    .map((segment) => {
      const semi = segment.indexOf(';');
      return semi < 0 ? segment : `${segment.slice(0, semi)};${maskParameters(segment.slice(semi + 1))}`;
    })
    .join('/');
}

// The token endpoint's parameters are all credentials or about them: its query is never logged.
// Matched on the decoded, lower-cased path, so no spelling of the path lets a query through.
function isTokenEndpoint(path: string): boolean {
  const decoded = decodeFully(path);
  return decoded === null || /\/oauth\/+token(?:[/;]|$)/.test(decoded.toLowerCase());
}

// The URL as it may be logged. Its query starts at the first `?` (or `#`: a fragment has no
// business in a request line, and is masked like a query).
export function redactUrl(url: string): string {
  const q = url.search(/[?#]/);
  const path = q < 0 ? url : url.slice(0, q);
  const masked = maskPath(path);
  if (q < 0) return masked;
  if (isTokenEndpoint(path)) return `${masked}${url[q]}${REDACTED}`;
  return `${masked}${url[q]}${maskParameters(url.slice(q + 1))}`;
}
