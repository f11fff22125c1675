// The station sockets this replica holds: at most one per station, the one of its newest login
// (the highest epoch, the claim's number in the connection table). An older socket is closed when
// a newer login of the station opens one, here or, as the takeover notices say, on another replica.
import type { FastifyBaseLogger } from 'fastify';
import type { StationSocket } from './ocpp/ocpp-adapter.js';

export interface StationSession {
  // The claim's epoch; null when the station did not offer its version's subprotocol, so it was
  // never claimed.
  epoch: number | null;
}

export type ClaimedSocket = StationSocket<StationSession>;

// Kept small: thousands of these are held per process.
export interface RegisteredSocket {
  socket: ClaimedSocket;
  epoch: number;
  // Any message or pong from the station moves it, in memory only.
  lastSeenAt: number;
  // The lastSeenAt last written, and when this station's next write may go.
  seenWrittenAt: number;
  nextSeenWriteAt: number;
}

export interface SeenDue {
  assetId: string;
  epoch: number;
  lastSeenAt: Date;
  held: RegisteredSocket;
}

export interface SocketRegistry {
  get(identity: string): RegisteredSocket | undefined;
  has(identity: string): boolean;
  // The socket of the claim at `epoch` opened: held, unless a newer login of the station claimed
  // it first (then it is closed, and false).
  hold(socket: ClaimedSocket, epoch: number): boolean;
  // The TCP connection of the claim at `epoch` closed: what that socket was last seen at, if it
  // was the one held.
  release(identity: string, epoch: number): number | undefined;
  // The takeover notices the lease renewal read: stations newer connections on other replicas
  // took, at the newer epochs.
  takenOver(notices: Array<{ assetId: string; epoch: number }>): void;
  // The stations whose lastSeenAt is due to be written (every one heard since its last write, with
  // `all`), and the note that a batch of them was written.
  seenDue(now: number, all: boolean): SeenDue[];
  seenWritten(batch: SeenDue[], now: number): void;
  // Every socket held here (a drain asks them all to reconnect elsewhere).
  sockets(): ClaimedSocket[];
  clear(): void;
}

const REPLACED = 'Replaced by a newer connection';

// `seenWriteMs`: how often one station's lastSeenAt is written at most (stationTimings).
export function createSocketRegistry(log: FastifyBaseLogger, seenWriteMs: number): SocketRegistry {
  const held = new Map<string, RegisteredSocket>();
  // Takeover notices for stations claimed here whose sockets had not opened yet, kept until the
  // next lease renewal: the socket opens milliseconds after its claim.
  const takeovers = new Map<string, number>();

  function replace(identity: string, entry: RegisteredSocket): void {
    held.delete(identity);
    entry.socket.close(1000, REPLACED);
  }

  return {
    get: (identity) => held.get(identity),
    has: (identity) => held.has(identity),

    hold(socket, epoch) {
      const { identity } = socket;
      const previous = held.get(identity);
      if ((previous && previous.epoch > epoch) || (takeovers.get(identity) ?? 0) > epoch) {
        // Two logins raced and this one claimed first: the other, here or elsewhere, is the newest.
        socket.close(1000, REPLACED);
        return false;
      }
      if (previous) {
        log.info({ station: identity }, 'station reconnected; closing its older socket');
        previous.socket.close(1000, REPLACED);
      }
      const now = Date.now();
      // The first write falls anywhere in the interval: stations that connected together (a storm)
      // do not all come due in the same second ever after.
      const entry: RegisteredSocket = { socket, epoch, lastSeenAt: now, seenWrittenAt: now, nextSeenWriteAt: now + Math.random() * seenWriteMs };
      held.set(identity, entry);
      socket.onActivity(() => {
        entry.lastSeenAt = Date.now();
      });
      return true;
    },

    release(identity, epoch) {
      const entry = held.get(identity);
      if (entry?.epoch === epoch) {
        held.delete(identity);
        return entry.lastSeenAt;
      }
      if (entry && entry.epoch < epoch) {
        // A newer login of the station claimed it here and hung up before its socket opened: the
        // row no longer names the older socket, and no other replica will send a notice for it.
        replace(identity, entry);
      }
      return undefined;
    },

    takenOver(notices) {
      takeovers.clear();
      for (const { assetId, epoch } of notices) {
        // Also for a station held here: a newer login of it may be between its claim and its open.
        takeovers.set(assetId, epoch);
        const entry = held.get(assetId);
        if (entry && entry.epoch < epoch) {
          log.info({ station: assetId }, 'station connected elsewhere; closing its socket here');
          replace(assetId, entry);
        }
      }
    },

    seenDue(now, all) {
      const due: SeenDue[] = [];
      for (const [assetId, entry] of held) {
        if (entry.lastSeenAt > entry.seenWrittenAt && (all || now >= entry.nextSeenWriteAt)) {
          due.push({ assetId, epoch: entry.epoch, lastSeenAt: new Date(entry.lastSeenAt), held: entry });
        }
      }
      return due;
    },

    seenWritten(batch, now) {
      for (const { held: entry, lastSeenAt } of batch) {
        entry.seenWrittenAt = lastSeenAt.getTime();
        entry.nextSeenWriteAt = now + seenWriteMs;
      }
    },

    sockets: () => [...held.values()].map((entry) => entry.socket),

    clear: () => held.clear(),
  };
}
