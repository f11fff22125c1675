// A subscription's target URL as checked when it is made: its form, then every address its host
// resolves to. Names resolve through the system's resolver (localhost) or through a resolver the
// test gives, so no test depends on the machine's DNS.
import { describe, expect, it } from 'vitest';
import { checkTargetUrl, type ResolveHost } from '../../src/events/target-rules.js';

const STRICT = { allowPrivateTargets: false };
const ALLOWED = { allowPrivateTargets: true };

// A resolver that knows a few names and answers "no such name" for the rest.
function resolverOf(names: Record<string, string[]>): ResolveHost {
  return async (hostname) => {
    const addresses = names[hostname];
    if (addresses === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

const resolve = resolverOf({
  'hooks.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
  'intranet.example.com': ['10.20.30.40'],
  'split.example.com': ['93.184.215.14', '192.168.1.10'],
  'mapped.example.com': ['::ffff:127.0.0.1'],
  'metadata.example.com': ['169.254.169.254'],
  'empty.example.com': [],
});

describe('checkTargetUrl', () => {
  it('takes an https URL whose host resolves to public addresses only', async () => {
    expect(await checkTargetUrl('https://hooks.example.com/in', { ...STRICT, resolve })).toEqual({ ok: true });
  });

  it('refuses a host that resolves to a loopback address, through the system resolver, unless private targets are allowed', async () => {
    expect(await checkTargetUrl('https://localhost:8443/in', STRICT)).toEqual({
      ok: false,
      reason: 'the host name localhost resolves to a loopback address',
    });
    expect(await checkTargetUrl('http://localhost:8080/in', ALLOWED)).toEqual({ ok: true });
  });

  it('refuses a name with a private address among its answers, and an IPv4-mapped answer', async () => {
    expect(await checkTargetUrl('https://intranet.example.com/', { ...STRICT, resolve })).toEqual({
      ok: false,
      reason: 'the host name intranet.example.com resolves to a private address',
    });
    expect(await checkTargetUrl('https://split.example.com/', { ...STRICT, resolve })).toEqual({
      ok: false,
      reason: 'the host name split.example.com resolves to a private address',
    });
    expect(await checkTargetUrl('https://mapped.example.com/', { ...STRICT, resolve })).toMatchObject({ ok: false });
    expect(await checkTargetUrl('https://intranet.example.com/', { ...ALLOWED, resolve })).toEqual({ ok: true });
  });

  it('refuses a name that resolves to a metadata service even with the allowance', async () => {
    expect(await checkTargetUrl('http://metadata.example.com/', { ...ALLOWED, resolve })).toEqual({
      ok: false,
      reason: 'the host name metadata.example.com resolves to a cloud metadata address',
    });
  });

  it('refuses a name that does not resolve, saying so', async () => {
    for (const host of ['nowhere.example.com', 'empty.example.com']) {
      expect(await checkTargetUrl(`https://${host}/`, { ...ALLOWED, resolve })).toEqual({
        ok: false,
        reason: `the host name ${host} does not resolve`,
      });
    }
    const failing: ResolveHost = () => Promise.reject(Object.assign(new Error('queryA ETIMEOUT'), { code: 'ETIMEOUT' }));
    expect(await checkTargetUrl('https://hooks.example.com/', { ...STRICT, resolve: failing })).toEqual({
      ok: false,
      reason: 'the host name hooks.example.com could not be resolved (ETIMEOUT)',
    });
  });

  it('checks the form before resolving anything', async () => {
    let resolutions = 0;
    const counting: ResolveHost = async (hostname) => {
      resolutions++;
      return resolve(hostname);
    };
    expect(await checkTargetUrl('http://hooks.example.com/', { ...STRICT, resolve: counting })).toEqual({ ok: false, reason: 'the URL must use https' });
    expect(await checkTargetUrl('https://a:b@hooks.example.com/', { ...STRICT, resolve: counting })).toMatchObject({ ok: false });
    expect(await checkTargetUrl('https://10.0.0.1/', { ...STRICT, resolve: counting })).toEqual({
      ok: false,
      reason: "the URL's host is a private address",
    });
    expect(await checkTargetUrl('https://93.184.215.14/', { ...STRICT, resolve: counting })).toEqual({ ok: true });
    expect(resolutions).toBe(0);
  });
});
