import { networkOf, sessionOf } from './database.js';
import { runLoad, type LoadResult } from './load.js';

// The body of a payment-recording request of the benchmarks: a new session for each (tag, i).
export function recordBody(tag: string, i: number): string {
  return JSON.stringify({
    network: networkOf(i),
    session: `ses_rec_${tag}_${i}`,
    sitePartners: [`sp_${i % 300}`],
    location: `loc_${i % 5000}`,
    currency: 'USD',
    paymentType: 'DRIVER_ACCOUNT',
    costs: { energy: 1200 + (i % 500), idle: i % 4 === 0 ? 150 : 0, flat: 100, time: 0 },
    usages: { energy: 24_000 + (i % 1000), time: 3600, idle: 300 },
    taxConfig: i % 3 === 0 ? null : { totalPercentSalesTax: 0.0725, energyPerKwhExciseTax: i % 2 ? 0.01 : null },
    priceAdjustment: i % 4 === 1 ? { id: 'pa_bench', amount: 20, maxAdjustment: 500 } : null,
    ...(i % 5 === 0 ? { additionalFee: 150 } : {}),
  });
}

// The 100-ID list beside another load (the stations and webhooks groups): 32 connections, 100
// random ids of the first 10,000 seeded sessions on every request; for `seconds`, and on until
// `until` settles when given.
export function listBeside(port: number, token: string, seconds: number, until?: Promise<unknown>): Promise<LoadResult> {
  return runLoad({
    port,
    connections: 32,
    durationSeconds: seconds,
    ...(until ? { until } : {}),
    next: () => ({
      method: 'GET',
      path: `/payments/v1/session-payments?sessionIds=${Array.from({ length: 100 }, () => sessionOf(Math.floor(Math.random() * 10_000))).join(',')}`,
      headers: { authorization: token },
    }),
  });
}
