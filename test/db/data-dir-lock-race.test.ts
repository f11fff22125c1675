// Processes that start together over a stale DATA_DIR lock: exactly one of them may hold the
// folder, whatever the timing, and every other one is refused naming that one. Real processes
// take the lock through the project's own module (test/fixtures/data-dir-lock-contender.ts).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCK_FILE } from '../../src/db/data-dir-lock.js';
import { killProcess, ROOT, serviceEnv } from '../helpers/service-process.js';

interface Answer {
  pid: number;
  ready?: true;
  held?: boolean;
  notices?: string[];
  refusal?: string;
}

interface Contender {
  child: ChildProcessWithoutNullStreams;
  next(): Promise<Answer>;
}

// A contender, once it has loaded everything and waits for "go".
async function startContender(): Promise<Contender> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/data-dir-lock-contender.ts'], { cwd: ROOT, env: serviceEnv({}) });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const answers: Answer[] = [];
  const waiting: ((answer: Answer) => void)[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    const answer = JSON.parse(line) as Answer;
    const take = waiting.shift();
    if (take) take(answer);
    else answers.push(answer);
  });
  const next = () =>
    new Promise<Answer>((resolve, reject) => {
      const queued = answers.shift();
      if (queued) return resolve(queued);
      // A safety net for a contender that dies or hangs, not a speed check.
      const guard = setTimeout(() => reject(new Error(`contender ${child.pid} did not answer; stderr: ${stderr}`)), 30_000);
      waiting.push((answer) => {
        clearTimeout(guard);
        resolve(answer);
      });
    });
  expect(await next()).toEqual({ pid: child.pid, ready: true });
  return { child, next };
}

const CONTENDERS = 5;
const ROUNDS = 30;

describe('the DATA_DIR lock, between processes started together', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cns-lock-race-'));
  let contenders: Contender[] = [];
  afterAll(async () => {
    await Promise.all(contenders.map((contender) => killProcess(contender.child)));
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${CONTENDERS} processes over a stale lock, ${ROUNDS} rounds: exactly one holds it each round, the others are refused naming it`, { timeout: 180_000 }, async () => {
    contenders = await Promise.all(Array.from({ length: CONTENDERS }, startContender));
    const rounds: { round: number; stale: string; holders: number[]; refusals: string[] }[] = [];
    // Round 0 is a fresh folder; every later one starts over the lock of the previous round's
    // holder, killed with SIGKILL: as that holder left it (odd rounds), or replaced by a lock file
    // naming that dead pid, written anew (even rounds).
    let deadPid = 0;
    for (let round = 0; round <= ROUNDS; round++) {
      const stale = round === 0 ? 'none' : round % 2 === 1 ? 'left by a killed holder' : 'written for a dead pid';
      if (stale === 'written for a dead pid') {
        rmSync(join(dir, LOCK_FILE), { force: true });
        writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: deadPid, holder: 'server', since: '2026-01-01T00:00:00.000Z', host: hostname() }));
      }
      for (const contender of contenders) contender.child.stdin.write(`go ${dir}\n`);
      const answers = await Promise.all(contenders.map((contender) => contender.next()));
      const holders = answers.filter((answer) => answer.held).map((answer) => answer.pid);
      rounds.push({ round, stale, holders, refusals: answers.filter((answer) => !answer.held).map((answer) => answer.refusal ?? '') });

      // The holders die without letting go; the others stay for the next round.
      const [gone, kept] = [contenders.filter((c) => holders.includes(c.child.pid!)), contenders.filter((c) => !holders.includes(c.child.pid!))];
      await Promise.all(gone.map((contender) => killProcess(contender.child)));
      deadPid = holders[0] ?? deadPid;
      contenders = [...kept, ...(await Promise.all(gone.map(startContender)))];
    }

    expect(rounds.filter((r) => r.holders.length !== 1)).toEqual([]);
    for (const { holders, refusals } of rounds) {
      for (const refusal of refusals) {
        expect(refusal).toMatch(new RegExp(`^DataDirError: DATA_DIR ${dir} is in use by the CLI \\(pid ${holders[0]}, since [^)]+\\): .*wait for that command to finish`));
      }
    }
  });
});
