// The pure rules of webhook targets: which addresses the service may connect to, and which URLs a
// subscription may name. Checked against a block list written apart from the rules (Node's
// BlockList, from the IANA special-purpose registries), for every address fast-check makes.
import { BlockList } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkTargetUrlForm, classifyAddress, MAX_TARGET_URL_LENGTH } from '../../src/events/target-addresses.js';

const STRICT = { allowPrivateTargets: false };
const ALLOWED = { allowPrivateTargets: true };

const IPV4_REFUSED: [string, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4], ['192.175.48.0', 24], ['192.31.196.0', 24], ['192.52.193.0', 24],
];
const refusedV4 = new BlockList();
for (const [network, prefix] of IPV4_REFUSED) refusedV4.addSubnet(network, prefix, 'ipv4');
// The metadata services that no allowance opens, one public among them (Azure's wire server).
const METADATA = ['169.254.169.254', '169.254.170.2', '169.254.170.23', '168.63.129.16', '100.100.100.200', '192.0.0.192', 'fd00:ec2::254', 'fd00:ec2::23'];

const octet = fc.integer({ min: 0, max: 255 });
const v4 = (a: number, b: number, c: number, d: number) => `${a}.${b}.${c}.${d}`;
const privateV4 = fc.oneof(
  fc.tuple(octet, octet, octet).map(([b, c, d]) => v4(10, b, c, d)),
  fc.tuple(fc.integer({ min: 16, max: 31 }), octet, octet).map(([b, c, d]) => v4(172, b, c, d)),
  fc.tuple(octet, octet).map(([c, d]) => v4(192, 168, c, d)),
  fc.tuple(octet, octet, octet).map(([b, c, d]) => v4(127, b, c, d)),
  fc.tuple(octet, octet).map(([c, d]) => v4(169, 254, c, d)),
  fc.tuple(fc.integer({ min: 64, max: 127 }), octet, octet).map(([b, c, d]) => v4(100, b, c, d)),
);
const hextet = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
const v4ToHextets = (text: string) => {
  const [a, b, c, d] = text.split('.').map(Number) as [number, number, number, number];
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
};

describe('classifyAddress', () => {
  it('refuses, without the allowance, exactly the IPv4 addresses of the special-purpose ranges', () => {
    fc.assert(
      fc.property(fc.ipV4(), (address) => {
        expect(classifyAddress(address, STRICT).allowed).toBe(!refusedV4.check(address, 'ipv4') && !METADATA.includes(address));
      }),
      { numRuns: 5000 },
    );
  });

  it('refuses every loopback, private, link-local and shared address without the allowance, and allows it with', () => {
    fc.assert(
      fc.property(privateV4, (address) => {
        expect(classifyAddress(address, STRICT)).toMatchObject({ allowed: false, reason: expect.stringMatching(/address$/) });
        expect(classifyAddress(address, ALLOWED).allowed).toBe(!METADATA.includes(address));
      }),
    );
  });

  it('refuses an IPv4 address carried in IPv6 (mapped, translated, NAT64, 6to4) without the allowance, whatever it is', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.constantFrom('::ffff:', '::ffff:0:', '64:ff9b::', '::'), (address, prefix) => {
        expect(classifyAddress(`${prefix}${address}`, STRICT).allowed).toBe(false);
        expect(classifyAddress(`${prefix}${v4ToHextets(address)}`, STRICT).allowed).toBe(false);
        expect(classifyAddress(`2002:${v4ToHextets(address)}::1`, STRICT).allowed).toBe(false);
      }),
    );
  });

  it('refuses the IPv6 loopback, unspecified, link-local, unique-local, multicast and documentation ranges, and anything outside 2000::/3', () => {
    const refused = fc.oneof(
      fc.constantFrom('::1', '::', '[::1]'),
      fc.tuple(hextet, hextet).map(([a, b]) => `fe80::${a}:${b}`),
      fc.tuple(fc.integer({ min: 0xfc00, max: 0xfdff }), hextet).map(([a, b]) => `${a.toString(16)}::${b}`),
      fc.tuple(fc.integer({ min: 0xff00, max: 0xffff }), hextet).map(([a, b]) => `${a.toString(16)}::${b}`),
      hextet.map((a) => `2001:db8::${a}`),
      fc.tuple(fc.integer({ min: 0x4000, max: 0xfbff }), hextet).map(([a, b]) => `${a.toString(16)}::${b}`),
    );
    fc.assert(
      fc.property(refused, (address) => {
        expect(classifyAddress(address, STRICT).allowed).toBe(false);
      }),
    );
  });

  it('allows public unicast addresses, IPv4 and IPv6', () => {
    for (const address of ['93.184.215.14', '8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e']) {
      expect(classifyAddress(address, STRICT), address).toEqual({ allowed: true });
    }
  });

  it('refuses the cloud metadata services in every spelling, with or without the allowance', () => {
    const spellings = METADATA.flatMap((address) =>
      address.includes(':') ? [address, `[${address}]`] : [address, `::ffff:${address}`, `::ffff:${v4ToHextets(address)}`, `64:ff9b::${address}`],
    );
    for (const address of spellings) {
      expect(classifyAddress(address, STRICT), address).toEqual({ allowed: false, reason: 'a cloud metadata address' });
      expect(classifyAddress(address, ALLOWED), address).toEqual({ allowed: false, reason: 'a cloud metadata address' });
    }
  });

  it('never allows without the allowance what it refuses with it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), (address) => {
        if (classifyAddress(address, STRICT).allowed) expect(classifyAddress(address, ALLOWED).allowed).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it('takes no host name and no shorthand IPv4 form as an address', () => {
    for (const text of ['localhost', 'example.com', '0x7f.1', '127.1', '2130706433', '', '1.2.3.4.5']) {
      expect(classifyAddress(text, ALLOWED), text).toEqual({ allowed: false, reason: 'not an IP address' });
    }
  });
});

describe('checkTargetUrlForm', () => {
  it('takes https URLs with a public or named host', () => {
    for (const url of ['https://hooks.example.com/in?x=1', 'https://93.184.215.14:8443/', 'https://[2606:4700:4700::1111]/']) {
      expect(checkTargetUrlForm(url, STRICT), url).toMatchObject({ ok: true });
    }
  });

  it('refuses http without the allowance and takes it with', () => {
    expect(checkTargetUrlForm('http://hooks.example.com/', STRICT)).toEqual({ ok: false, reason: 'the URL must use https' });
    expect(checkTargetUrlForm('http://hooks.example.com/', ALLOWED)).toMatchObject({ ok: true, host: 'hooks.example.com', hostIsAddress: false });
    for (const url of ['ftp://hooks.example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'ws://hooks.example.com/']) {
      expect(checkTargetUrlForm(url, ALLOWED).ok, url).toBe(false);
    }
  });

  it('refuses a user name or password in the URL', () => {
    for (const url of ['https://user:secret@hooks.example.com/', 'https://user@hooks.example.com/', 'https://:secret@hooks.example.com/']) {
      expect(checkTargetUrlForm(url, ALLOWED), url).toEqual({ ok: false, reason: 'the URL must not contain a user name or password' });
    }
  });

  it('refuses what does not parse, and URLs over the length cap', () => {
    expect(checkTargetUrlForm('hooks.example.com/in', STRICT)).toEqual({ ok: false, reason: 'the URL is not an absolute URL' });
    const long = `https://hooks.example.com/${'a'.repeat(MAX_TARGET_URL_LENGTH)}`;
    expect(checkTargetUrlForm(long, STRICT)).toEqual({ ok: false, reason: `the URL is longer than ${MAX_TARGET_URL_LENGTH} characters` });
    expect(checkTargetUrlForm(long.slice(0, MAX_TARGET_URL_LENGTH), STRICT).ok).toBe(true);
  });

  it('applies the address rules to address literals in any spelling the URL parser reads', () => {
    const refused = ['https://127.0.0.1/', 'https://0x7f.1/', 'https://2130706433/', 'https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://10.1.2.3/'];
    for (const url of refused) expect(checkTargetUrlForm(url, STRICT).ok, url).toBe(false);
    for (const url of ['http://127.0.0.1:8080/', 'http://[::ffff:127.0.0.1]/', 'http://10.1.2.3/']) {
      expect(checkTargetUrlForm(url, ALLOWED), url).toMatchObject({ ok: true, hostIsAddress: true });
    }
    expect(checkTargetUrlForm('http://169.254.169.254/latest/meta-data/', ALLOWED)).toEqual({
      ok: false,
      reason: "the URL's host is a cloud metadata address",
    });
    expect(checkTargetUrlForm('https://[::1]:9000/in', ALLOWED)).toMatchObject({ ok: true, host: '::1' });
  });
});
