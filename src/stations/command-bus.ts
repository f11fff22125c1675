// Commands for a station held by another replica, and their answers. With
// PostgreSQL: LISTEN/NOTIFY on a dedicated connection per replica, one channel per replica, the
// password sealed to the holding replica's key. With PGlite there is one process, and the path is
// a function call.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { FastifyBaseLogger } from 'fastify';
import type { PasswordCommand, StationAnswer } from '../asset-management/station-credentials-service.js';
import { loggableError } from '../db/failures.js';
import { open, seal, type ReplicaKeys, type SealedBox } from './sealed-box.js';

// Sends a command to a station this replica holds.
export type LocalExecutor = (command: PasswordCommand) => Promise<StationAnswer>;
// Whether this replica holds an open socket of the station.
type LocalHolds = (assetId: string) => boolean;

export interface CommandTarget {
  replicaId: string;
  publicKey: string | null;
}

export interface CommandBus {
  start(): Promise<void>;
  send(target: CommandTarget, command: PasswordCommand): Promise<StationAnswer>;
  // Whether the target holds an open socket of the station; undefined when it does not answer by
  // the deadline. Throws when the question could not be sent.
  holds(target: CommandTarget, assetId: string, deadline: number): Promise<boolean | undefined>;
  close(): Promise<void>;
}

// Time left for the answer to travel back: the holder gives the station this much less than the
// sender waits.
const RETURN_MARGIN_MS = 200;
const MAX_RETRY_MS = 2000;

// setTimeout fires at once beyond this.
function waitMs(deadline: number): number {
  return Math.min(Math.max(0, deadline - Date.now()), 2 ** 31 - 1);
}

function ignore(): void {}

// The replicas of this process (PGlite: one process holds them all).
const inProcess = new Map<string, { execute: LocalExecutor; holds: LocalHolds }>();

export function createInProcessBus(replicaId: string, execute: LocalExecutor, holds: LocalHolds): CommandBus {
  return {
    async start() {
      inProcess.set(replicaId, { execute, holds });
    },
    async send(target, command) {
      const replica = inProcess.get(target.replicaId);
      return replica ? replica.execute(command) : { kind: 'notSent' };
    },
    async holds(target, assetId) {
      return inProcess.get(target.replicaId)?.holds(assetId);
    },
    async close() {
      inProcess.delete(replicaId);
    },
  };
}

export function channelOf(replicaId: string): string {
  return `cns_cmd_${replicaId.toLowerCase()}`;
}

interface CommandMessage {
  t: 'cmd';
  id: string;
  from: string;
  assetId: string;
  deadline: number;
  box: SealedBox;
}

interface AnswerMessage {
  t: 'ans';
  id: string;
  answer: StationAnswer;
}

// Does the replica hold the station's socket? Nothing secret crosses, so nothing is sealed.
interface AskMessage {
  t: 'ask';
  id: string;
  from: string;
  assetId: string;
}

// The answer to an AskMessage (wire tag `held`).
interface HoldsReply {
  t: 'held';
  id: string;
  held: boolean;
}

const ANSWER_KINDS = new Set(['status', 'callError', 'timeout', 'dropped', 'notSent']);

function isAnswer(value: unknown): value is StationAnswer {
  const answer = value as { kind?: unknown; status?: unknown; code?: unknown } | null;
  if (typeof answer !== 'object' || answer === null || !ANSWER_KINDS.has(answer.kind as string)) return false;
  if (answer.kind === 'status') return typeof answer.status === 'string';
  if (answer.kind === 'callError') return typeof answer.code === 'string';
  return true;
}

// Binds a sealed password to its command: another command, asset or deadline cannot reuse it.
function additionalData(m: Pick<CommandMessage, 'id' | 'from' | 'assetId' | 'deadline'>): string {
  return JSON.stringify([m.id, m.from, m.assetId, m.deadline]);
}

export interface PgBusOptions {
  connectionString: string;
  replicaId: string;
  keys: ReplicaKeys;
  execute: LocalExecutor;
  holds: LocalHolds;
  // NOTIFY through the service's pool (delivered at commit, never replayed).
  notify(channel: string, payload: string): Promise<void>;
  log: FastifyBaseLogger;
}

export function createPgCommandBus(options: PgBusOptions): CommandBus {
  const { replicaId, log } = options;
  const channel = channelOf(replicaId);
  const waiting = new Map<string, (answer: StationAnswer) => void>();
  const asking = new Map<string, (held: boolean | undefined) => void>();
  let current: pg.Client | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let retryMs = 100;
  let closing = false;

  function scheduleListen(): void {
    if (closing || retryTimer) return;
    const delay = retryMs;
    retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      listen().catch((error: unknown) => log.warn({ err: loggableError(error) }, 'command listener could not connect; retrying'));
    }, delay);
    retryTimer.unref();
  }

  // A dedicated connection: a LISTEN lives as long as its session. A terminated backend ends it,
  // and a new one listens again; an answer lost meanwhile is a timeout for its sender (UNCONFIRMED).
  async function listen(): Promise<void> {
    const client = new pg.Client({ connectionString: options.connectionString, application_name: 'charging-network-service/commands', keepAlive: true });
    let lost = false;
    const onLost = () => {
      if (lost) return;
      lost = true;
      if (current === client) current = undefined;
      client.end().catch(ignore);
      scheduleListen();
    };
    client.on('error', (error) => {
      log.warn({ err: loggableError(error) }, 'command listener connection lost; listening again');
      onLost();
    });
    client.on('end', onLost);
    client.on('notification', (message) => {
      if (message.channel === channel && message.payload !== undefined) receive(message.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${channel}"`);
    } catch (error) {
      onLost();
      throw error;
    }
    if (closing) {
      await client.end().catch(ignore);
      return;
    }
    current = client;
    retryMs = 100;
  }

  function receive(payload: string): void {
    let message: CommandMessage | AnswerMessage | AskMessage | HoldsReply;
    try {
      message = JSON.parse(payload) as CommandMessage | AnswerMessage | AskMessage | HoldsReply;
    } catch {
      return;
    }
    if (message?.t === 'held' && typeof message.id === 'string' && typeof message.held === 'boolean') {
      asking.get(message.id)?.(message.held);
      return;
    }
    if (message?.t === 'ask' && typeof message.id === 'string' && typeof message.from === 'string' && typeof message.assetId === 'string') {
      const reply: HoldsReply = { t: 'held', id: message.id, held: options.holds(message.assetId) };
      options.notify(channelOf(message.from), JSON.stringify(reply)).catch((error: unknown) =>
        log.warn({ station: message.assetId, err: loggableError(error) }, 'could not answer another replica about a station'),
      );
      return;
    }
    if (message?.t === 'ans' && typeof message.id === 'string') {
      const resolve = waiting.get(message.id);
      // Anything but a well-formed answer is no answer: its sender's timeout decides.
      if (!resolve || !isAnswer(message.answer)) return;
      waiting.delete(message.id);
      resolve(message.answer);
    } else if (message?.t === 'cmd' && typeof message.id === 'string') {
      void runCommand(message);
    }
  }

  async function runCommand(message: CommandMessage): Promise<void> {
    try {
      const deadline = message.deadline - RETURN_MARGIN_MS;
      if (!(Date.now() < deadline)) {
        // Never sent late: the sender has already answered, or is about to.
        log.info({ station: message.assetId }, 'password command past its deadline; dropped');
        return;
      }
      const password = open(options.keys, message.box, additionalData(message));
      const answer = await options.execute({ assetId: message.assetId, password, deadline });
      const reply: AnswerMessage = { t: 'ans', id: message.id, answer };
      await options.notify(channelOf(message.from), JSON.stringify(reply));
    } catch (error) {
      log.warn({ station: message.assetId, err: loggableError(error) }, 'password command for another replica failed');
    }
  }

  return {
    async start() {
      await listen().catch((error: unknown) => log.warn({ err: loggableError(error) }, 'command listener could not connect; retrying'));
    },
    async send(target, command) {
      if (target.publicKey === null || !(Date.now() < command.deadline)) return { kind: 'notSent' };
      const message: CommandMessage = { t: 'cmd', id: randomUUID(), from: replicaId, assetId: command.assetId, deadline: command.deadline, box: undefined as never };
      message.box = seal(target.publicKey, command.password, additionalData(message));
      let timer: NodeJS.Timeout | undefined;
      const answered = new Promise<StationAnswer>((resolve) => {
        waiting.set(message.id, resolve);
        timer = setTimeout(() => {
          waiting.delete(message.id);
          resolve({ kind: 'timeout' });
        }, waitMs(command.deadline));
      });
      try {
        await options.notify(channelOf(target.replicaId), JSON.stringify(message));
      } catch (error) {
        // Whether the notification went out is unknown: the outcome is, too.
        log.warn({ station: command.assetId, err: loggableError(error) }, 'could not route a password command to its replica');
        waiting.delete(message.id);
        clearTimeout(timer);
        return { kind: 'timeout' };
      }
      try {
        return await answered;
      } finally {
        clearTimeout(timer);
      }
    },
    async holds(target, assetId, deadline) {
      const message: AskMessage = { t: 'ask', id: randomUUID(), from: replicaId, assetId };
      let timer: NodeJS.Timeout | undefined;
      const answered = new Promise<boolean | undefined>((resolve) => {
        asking.set(message.id, resolve);
        timer = setTimeout(() => resolve(undefined), waitMs(deadline));
      });
      try {
        // A question that could not be sent throws: that is not a replica that did not answer.
        await options.notify(channelOf(target.replicaId), JSON.stringify(message));
        return await answered;
      } finally {
        asking.delete(message.id);
        clearTimeout(timer);
      }
    },
    async close() {
      closing = true;
      clearTimeout(retryTimer);
      for (const [id, resolve] of waiting) {
        waiting.delete(id);
        resolve({ kind: 'timeout' });
      }
      for (const resolve of asking.values()) resolve(undefined);
      await current?.end().catch(ignore);
      current = undefined;
    },
  };
}
