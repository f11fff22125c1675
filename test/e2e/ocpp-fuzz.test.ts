// The OCPP-J endpoint of a live service process, fuzzed: stations of both versions send every
// action either version defines, valid and broken payloads, odd nesting and sizes, broken framing,
// pipelined calls; some never read their answers, some log in with the wrong credentials. Whatever
// they send, the process keeps serving (/healthz, another station's Heartbeat), its memory stays
// bounded, and every station gets well-formed answers to its own calls or a documented close.
//
// A failure prints fast-check's seed and path; OCPP_FUZZ_SEED=<seed> replays the same sessions
// (the service's timing is not replayed, so a race may need a few runs).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OCPP_VERSIONS } from '../../src/kernel/ocpp-vocabulary.js';
import { bootstrapToken, killProcess, startService } from '../helpers/service-process.js';
import { createServerDatabase } from '../helpers/test-database.js';
import { stationClient, type StationClient } from '../helpers/station-factory.js';
import type { Version } from './ocpp-fuzz-frames.js';
import { runSession, sessionArb, type StationAsset } from './ocpp-fuzz-sessions.js';

// The whole file stays within a minute on two cores: the runs stop after RUN_TIME_LIMIT_MS.
const NUM_RUNS = 40;
const RUN_TIME_LIMIT_MS = 30_000;
const MAX_SESSIONS_PER_RUN = 3;
// The service's resident memory may grow this much over its figure after the warm-up.
const RSS_GROWTH_LIMIT_MIB = 150;

function rssMiB(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]) / 1024;
}

const database = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite';

describe(`the OCPP-J endpoint of a live process, fuzzed (${database})`, () => {
  let service: Awaited<ReturnType<typeof startService>>;
  let dropDatabase: (() => Promise<void>) | undefined;
  let dataDir: string | undefined;
  let bystander: StationClient;
  const assets: Record<Version, StationAsset[]> = { '1.6': [], '2.0.1': [] };
  const refusedAssets = {} as Record<Version, StationAsset>;

  beforeAll(async () => {
    let storage: Record<string, string>;
    if (process.env.DATABASE_URL) {
      const server = await createServerDatabase();
      dropDatabase = server.drop;
      storage = { DATABASE_URL: server.url };
    } else {
      dataDir = mkdtempSync(join(tmpdir(), 'cns-ocpp-fuzz-'));
      storage = { DATA_DIR: dataDir };
    }
    service = await startService({ ...storage, LOG_LEVEL: 'error', OCPP_MIN_SECURITY_PROFILE: '1' });
    const { token } = await bootstrapToken(service);
    const api = async (path: string, body: unknown) => {
      const res = await fetch(`${service.base}/asset-management/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json = (await res.json()) as { data: { password?: string } };
      if (res.status >= 300) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(json)}`);
      return json.data;
    };
    // Generated passwords: one asset per session slot and version, one per version for the
    // refused logins (a station whose logins fail may be throttled itself; the others never),
    // and one for the bystander.
    const provision = async (id: string, version: Version): Promise<StationAsset> => {
      await api('/assets', { id, network: 'net_fuzz', ocppVersion: version, securityProfile: 1 });
      const { password } = await api('/assets/change-password', { id });
      return { id, version, password: password! };
    };
    for (const version of OCPP_VERSIONS) {
      for (let i = 0; i < MAX_SESSIONS_PER_RUN; i++) assets[version].push(await provision(`CP-fuzz-${version.replace(/\./g, '')}-${i}`, version));
      refusedAssets[version] = await provision(`CP-fuzz-${version.replace(/\./g, '')}-refused`, version);
    }
    const own = await provision('CP-fuzz-bystander', '2.0.1');
    bystander = stationClient(service.endpoint, { identity: own.id, password: own.password, protocols: ['ocpp2.0.1'] });
    await bystander.connect();
  });

  afterAll(async () => {
    await bystander?.close({ force: true }).catch(() => undefined);
    await killProcess(service?.child);
    await dropDatabase?.();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('survives every session, stays within its memory bound, and answers each station only with answers to its own calls or a documented close', async () => {
    const pid = service.child.pid!;
    // The figure to grow from: after the process has served a station (its code is compiled).
    expect(await bystander.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
    const startMiB = rssMiB(pid);
    let peak = { mib: startMiB, run: 0 };
    let run = 0;
    // Read throughout, not only between runs: a non-reading station's answers are freed when it
    // is gone.
    const sampler = setInterval(() => {
      if (service.child.exitCode !== null) return;
      const mib = rssMiB(pid);
      if (mib > peak.mib) peak = { mib, run };
    }, 50);
    try {
      const scenario = fc.array(sessionArb, { minLength: 1, maxLength: MAX_SESSIONS_PER_RUN });
      await fc.assert(
        fc.asyncProperty(scenario, async (sessions) => {
          run += 1;
          const problems = (
            await Promise.all(
              sessions.map((spec, i) =>
                runSession({ port: Number(new URL(service.base).port), endpoint: service.endpoint }, spec.kind === 'refused' ? refusedAssets[spec.version] : assets[spec.version][i]!, spec),
              ),
            )
          ).flat();
          if (service.child.exitCode !== null || service.child.signalCode !== null) {
            throw new Error(`the service exited (${service.child.exitCode ?? service.child.signalCode}):\n${service.output.stderr.slice(-3000)}\n${problems.join('\n')}`);
          }
          const health = await fetch(`${service.base}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
            (r) => r.status,
            (e: unknown) => String(e),
          );
          if (health !== 200) problems.push(`/healthz answered ${health}`);
          const beat = await bystander.call('Heartbeat', {}).then(
            () => 'ok',
            (e: unknown) => String(e),
          );
          if (beat !== 'ok') problems.push(`the bystander station's Heartbeat failed: ${beat}`);
          if (peak.mib > startMiB + RSS_GROWTH_LIMIT_MIB) {
            problems.push(`RSS reached ${peak.mib.toFixed(0)} MiB in run ${peak.run} (start ${startMiB.toFixed(0)} MiB, limit +${RSS_GROWTH_LIMIT_MIB} MiB)`);
          }
          if (problems.length) throw new Error(problems.join('\n'));
        }),
        {
          numRuns: NUM_RUNS,
          interruptAfterTimeLimit: RUN_TIME_LIMIT_MS,
          markInterruptAsFailure: false,
          // The process is the state under test: a failed run may leave it short of memory or
          // holding sockets, so shrinking against it would judge other runs by that run's leftovers.
          endOnFailure: true,
          ...(process.env.OCPP_FUZZ_SEED ? { seed: Number(process.env.OCPP_FUZZ_SEED) } : {}),
        },
      );
    } finally {
      clearInterval(sampler);
    }
    expect(run).toBeGreaterThan(0);
  }, 120_000);
});
