// Which webhook targets may be reached. Provisional: the scheme only (https, or http where private
// targets are allowed), until the checks after DNS resolution take its place.
export async function checkTargetUrl(url: string, options: { allowPrivateTargets: boolean }): Promise<{ ok: true } | { ok: false; reason: string }> {
  const protocol = new URL(url).protocol;
  if (protocol === 'https:' || (options.allowPrivateTargets && protocol === 'http:')) return Promise.resolve({ ok: true });
  return Promise.resolve({ ok: false, reason: 'only https URLs are allowed' });
}
