import ipaddr from 'ipaddr.js';

// Which webhook targets the service may connect to (docs/events.md, "Targets"): the URL's form and
// each address its host resolves to. Pure: no resolution, no connection. The resolution and the
// connections that apply these rules are in target-rules.ts and guarded-connector.ts.

// The longest URL a subscription may name.
export const MAX_TARGET_URL_LENGTH = 2048;

type IPAddress = ipaddr.IPv4 | ipaddr.IPv6;

// Cloud metadata services, refused even where private targets are allowed: a subscription must
// never be able to make the service call the instance's credential endpoint. AWS, GCP, Azure,
// DigitalOcean, OpenStack (169.254.169.254), AWS ECS and EKS (169.254.170.2, 169.254.170.23), the
// AWS IPv6 endpoints, Azure's wire server, Alibaba Cloud, Oracle Cloud's 192.0.0.192.
const METADATA_ADDRESSES = [
  '169.254.169.254',
  '169.254.170.2',
  '169.254.170.23',
  'fd00:ec2::254',
  'fd00:ec2::23',
  '168.63.129.16',
  '100.100.100.200',
  '192.0.0.192',
].map((text) => ipaddr.parse(text).toNormalizedString());

// ipaddr.js's range names, as a reason reads them. Every range other than `unicast` is refused
// without the allowance; the ones not named here read as "a reserved address".
const RANGE_WORDS: Record<string, string> = {
  loopback: 'a loopback address',
  private: 'a private address',
  linkLocal: 'a link-local address',
  uniqueLocal: 'a unique-local address',
  carrierGradeNat: 'a shared (carrier-grade NAT) address',
  multicast: 'a multicast address',
  broadcast: 'a broadcast address',
  unspecified: 'an unspecified address',
  ipv4Mapped: 'an IPv4-mapped IPv6 address',
  ipv4Compatible: 'an IPv4-compatible IPv6 address',
  rfc6145: 'an IPv4-translated IPv6 address',
  rfc6052: 'an IPv4-embedded (NAT64) IPv6 address',
  '6to4': 'a 6to4 address',
  teredo: 'a Teredo address',
  deprecatedSiteLocal: 'a site-local address',
  notGlobal: 'an address outside the global unicast range',
};

// The deprecated IPv4-compatible form (`::a.b.c.d`): ipaddr.js files it under `unicast`.
const IPV4_COMPATIBLE: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('::'), 96];
// IPv6 addresses that the internet routes are within 2000::/3.
const GLOBAL_UNICAST_V6: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse('2000::'), 3];

function rangeOf(address: IPAddress): string {
  if (address.kind() === 'ipv4') return address.range();
  const v6 = address as ipaddr.IPv6;
  const range = v6.range();
  if (range !== 'unicast') return range;
  if (v6.match(IPV4_COMPATIBLE)) return 'ipv4Compatible';
  return v6.match(GLOBAL_UNICAST_V6) ? 'unicast' : 'notGlobal';
}

// The IPv4 address an IPv6 one carries (mapped, translated, compatible, NAT64, 6to4), if any: the
// metadata addresses are refused in each of these spellings too.
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | null {
  const parts = address.parts;
  const lastTwo = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  switch (rangeOf(address)) {
    case 'ipv4Mapped':
    case 'rfc6145':
    case 'ipv4Compatible':
    case 'rfc6052':
      return lastTwo(parts[6]!, parts[7]!);
    case '6to4':
      return lastTwo(parts[1]!, parts[2]!);
    default:
      return null;
  }
}

function isMetadata(address: IPAddress): boolean {
  if (METADATA_ADDRESSES.includes(address.toNormalizedString())) return true;
  if (address.kind() === 'ipv6') {
    const inner = embeddedIPv4(address as ipaddr.IPv6);
    return inner !== null && METADATA_ADDRESSES.includes(inner.toNormalizedString());
  }
  return false;
}

// A host as URLs spell it, IPv6 literals in brackets, as resolvers and address parsers take it.
export function unbracketed(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

export type AddressVerdict = { allowed: true } | { allowed: false; reason: string };

// Whether the service may connect to `address` (an IP address in its usual text form). Without
// the allowance only public unicast addresses pass; with it, everything but a metadata service.
export function classifyAddress(address: string, options: { allowPrivateTargets: boolean }): AddressVerdict {
  const text = unbracketed(address);
  // Only the four-part decimal IPv4 form and IPv6: resolvers and URL parsers answer nothing else.
  if (!ipaddr.IPv4.isValidFourPartDecimal(text) && !ipaddr.IPv6.isValid(text)) {
    return { allowed: false, reason: 'not an IP address' };
  }
  const parsed = ipaddr.parse(text);
  if (isMetadata(parsed)) return { allowed: false, reason: 'a cloud metadata address' };
  if (options.allowPrivateTargets) return { allowed: true };
  const range = rangeOf(parsed);
  if (range === 'unicast') return { allowed: true };
  return { allowed: false, reason: RANGE_WORDS[range] ?? 'a reserved address' };
}

// A target URL that passed its form's rules: the parsed URL and its host as a resolver or the
// address rules take it (IPv6 literals without their brackets).
export type TargetUrl = { url: URL; host: string; hostIsAddress: boolean };

export type TargetUrlVerdict = ({ ok: true } & TargetUrl) | { ok: false; reason: string };

// The URL's form: parses, `https` (or `http` with the allowance), no user name or password, at
// most MAX_TARGET_URL_LENGTH characters, and an address literal that classifyAddress accepts.
export function checkTargetUrlForm(text: string, options: { allowPrivateTargets: boolean }): TargetUrlVerdict {
  if (text.length > MAX_TARGET_URL_LENGTH) {
    return { ok: false, reason: `the URL is longer than ${MAX_TARGET_URL_LENGTH} characters` };
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: 'the URL is not an absolute URL' };
  }
  const schemes = options.allowPrivateTargets ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    return { ok: false, reason: options.allowPrivateTargets ? 'the URL must use https or http' : 'the URL must use https' };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'the URL must not contain a user name or password' };
  }
  const host = unbracketed(url.hostname);
  if (host === '') return { ok: false, reason: 'the URL has no host' };
  const hostIsAddress = ipaddr.IPv4.isValidFourPartDecimal(host) || ipaddr.IPv6.isValid(host);
  if (hostIsAddress) {
    const verdict = classifyAddress(host, options);
    if (!verdict.allowed) return { ok: false, reason: `the URL's host is ${verdict.reason}` };
  }
  return { ok: true, url, host, hostIsAddress };
}
