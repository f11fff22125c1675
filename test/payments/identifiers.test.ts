// Identifier rules of the payments family (docs/api.md, "Session payments"): IDs the list must find again, Cc/Cf, NFC.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/test-app.js';
import {
  RECORD_URL,
  collectUrl,
  listPayments,
  oneUrl,
  paymentBody,
  reader,
  recordPayment,
  uniqueId,
  validationError,
  writer,
  type RecordPaymentBody,
} from '../helpers/payments-factory.js';
import type { SessionPayment } from '../../src/payments/payments-schemas.js';

const t = useTestApp();

function post(body: RecordPaymentBody) {
  return t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t) }, payload: body as unknown as Record<string, unknown> });
}

async function listed(sessionIds: string[]): Promise<SessionPayment[]> {
  const res = await listPayments(t, `sessionIds=${sessionIds.map(encodeURIComponent).join(',')}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as SessionPayment[];
}

// Precomposed é (U+00E9) and e + combining acute (U+0301): canonically the same text.
const NFC_E = '\u00e9';
const NFD_E = 'e\u0301';

describe('IDs the list must find again: no comma, no leading or trailing whitespace', () => {
  type Case = [name: string, overrides: (session: string) => Partial<RecordPaymentBody>, path: (string | number)[]];
  const cases: Case[] = [
    ['session with outer spaces', (s) => ({ session: ` ${s} ` }), ['session']],
    ['session with a trailing em space', (s) => ({ session: `${s}\u2003` }), ['session']],
    ['session with a leading no-break space', (s) => ({ session: `\u00a0${s}` }), ['session']],
    ['session with a comma', (s) => ({ session: `${s},b` }), ['session']],
    ['network with a leading space', () => ({ network: ' net_U' }), ['network']],
    ['network with a comma', () => ({ network: 'net_a,net_b' }), ['network']],
    ['location with a trailing space', () => ({ location: 'loc_1 ' }), ['location']],
    ['location with a comma', () => ({ location: 'loc,1' }), ['location']],
    ['a site partner with a leading space', () => ({ sitePartners: ['sp_1', 'sp_2', ' sp_3'] }), ['sitePartners', 2]],
    ['a site partner with a comma', () => ({ sitePartners: ['sp_1,sp_2'] }), ['sitePartners', 0]],
  ];

  it.each(cases)('%s: 400 invalid_format at the field, nothing stored', async (_name, overrides, path) => {
    const session = uniqueId('ses');
    const res = await post(paymentBody({ session, ...overrides(session) }));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual(validationError([{ code: 'invalid_format', path }]));
    expect(await listed([session, 'b'])).toEqual([]);
  });

  it('a priceAdjustment.id may hold a comma and inner spaces (it is never a list key), not outer whitespace', async () => {
    const payment = await recordPayment(t, { session: uniqueId('ses inner'), priceAdjustment: { id: 'spring, 10 % off', amount: 10, maxAdjustment: null } });
    expect(payment.priceAdjustment?.id).toBe('spring, 10 % off');
    expect(await listed([payment.session])).toEqual([payment]);
    const res = await post(paymentBody({ priceAdjustment: { id: 'spring ', amount: 10, maxAdjustment: null } }));
    expect(res.json()).toEqual(validationError([{ code: 'invalid_format', path: ['priceAdjustment', 'id'] }]));
  });
});

describe('control and format characters (Cc, Cf)', () => {
  const FORMAT_CHARACTERS = [
    ['zero-width space', '\u200b'],
    ['right-to-left override', '\u202e'],
    ['byte order mark', '\ufeff'],
    ['soft hyphen', '\u00ad'],
  ] as const;
  const FIELDS: [string, (c: string) => Partial<RecordPaymentBody>, (string | number)[]][] = [
    ['session', (c) => ({ session: `${uniqueId('ses')}${c}x` }), ['session']],
    ['network', (c) => ({ network: `net${c}_a` }), ['network']],
    ['location', (c) => ({ location: `loc${c}1` }), ['location']],
    ['sitePartners', (c) => ({ sitePartners: ['sp_1', `sp${c}2`] }), ['sitePartners', 1]],
    ['priceAdjustment.id', (c) => ({ priceAdjustment: { id: `padj${c}1`, amount: 10, maxAdjustment: null } }), ['priceAdjustment', 'id']],
  ];

  it.each(FORMAT_CHARACTERS)('refuses a %s in every ID with 400 at its path', async (_name, c) => {
    for (const [, overrides, path] of FIELDS) {
      const res = await post(paymentBody(overrides(c)));
      expect(res.statusCode, `${path.join('.')}: ${res.body}`).toBe(400);
      expect(res.json()).toEqual(validationError([{ code: 'invalid_format', path }]));
    }
  });

  it('a session ID that looks like a recorded one but holds U+202E is refused, not a second payment', async () => {
    const session = uniqueId('ses');
    await recordPayment(t, { session });
    const res = await post(paymentBody({ session: `${session}\u202e` }));
    expect(res.statusCode).toBe(400);
    expect(await listed([session])).toHaveLength(1);
  });

  it('a payment id holding a format character is 400 at ["id"] to read and to collect', async () => {
    const payment = await recordPayment(t);
    const id = `${payment.id}\u200b`;
    const read = await t.app.inject({ method: 'GET', url: oneUrl(id), headers: { authorization: reader(t) } });
    const collect = await t.app.inject({ method: 'POST', url: collectUrl(id), headers: { authorization: writer(t) } });
    for (const res of [read, collect]) {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual(validationError([{ code: 'invalid_format', path: ['id'] }]));
    }
  });
});

describe('NFC', () => {
  it('stores and answers every ID in NFC', async () => {
    const session = uniqueId(`ses_Soci${NFD_E}t${NFD_E}`);
    const payment = await recordPayment(t, {
      session,
      network: `net_${NFD_E}`,
      location: `loc_${NFD_E}`,
      sitePartners: [`sp_${NFD_E}`, `sp_${NFC_E}`, 'sp_2'],
      priceAdjustment: { id: `padj_${NFD_E}`, amount: 10, maxAdjustment: null },
    });
    expect(payment).toMatchObject({
      session: session.normalize('NFC'),
      network: `net_${NFC_E}`,
      location: `loc_${NFC_E}`,
      // Two spellings of one partner are one partner.
      sitePartners: [`sp_${NFC_E}`, 'sp_2'],
      priceAdjustment: { id: `padj_${NFC_E}` },
    });
    expect(payment.session).not.toBe(session);
    const read = await t.app.inject({ method: 'GET', url: oneUrl(payment.id), headers: { authorization: reader(t) } });
    expect(read.json()).toEqual(payment);
  });

  it('a payment recorded with an NFD session ID is listed by its NFC and by its NFD spelling', async () => {
    const nfd = uniqueId(`ses_caf${NFD_E}`);
    const payment = await recordPayment(t, { session: nfd });
    expect(await listed([nfd.normalize('NFC')])).toEqual([payment]);
    expect(await listed([nfd])).toEqual([payment]);
    // One session, whichever way it is spelt.
    expect(await listed([nfd, nfd.normalize('NFC')])).toEqual([payment]);
  });

  it('a second payment for the NFC spelling of a recorded NFD session is 409', async () => {
    const nfd = uniqueId(`ses_${NFD_E}`);
    await recordPayment(t, { session: nfd });
    const res = await post(paymentBody({ session: nfd.normalize('NFC') }));
    expect(res.statusCode, res.body).toBe(409);
  });

  it('counts length in code points after normalisation: 128 decomposed é are 128 characters', async () => {
    const payment = await recordPayment(t, { location: NFD_E.repeat(128) });
    expect(payment.location).toBe(NFC_E.repeat(128));
    const res = await post(paymentBody({ location: NFD_E.repeat(129) }));
    expect(res.json()).toEqual(validationError([{ code: 'too_big', path: ['location'] }]));
  });

  it('two spellings of one session ID count once towards the 100 distinct IDs of a list', async () => {
    const base = Array.from({ length: 99 }, (_, i) => `x${i}`);
    const res = await listPayments(t, `sessionIds=${[...base, `caf${NFC_E}`, `caf${NFD_E}`].map(encodeURIComponent).join(',')}`);
    expect(res.statusCode, res.body).toBe(200);
  });
});
