import { spawn } from 'node:child_process';
import type { Server as NetServer } from 'node:net';

// A handle on a listening socket's file descriptor, as Node's IPC hands one over.
export type ListeningHandle = object;

// The child's whole program: send back every handle it is sent, and close its own copy once sent,
// so that it holds at most one descriptor of the socket at a time. It never listens on them (a raw
// handle arrives unopened), so it never accepts a connection meant for the service.
const ECHO = "process.on('message', (message, handle) => process.send(message, handle, () => handle.close()))";

const ECHO_TIMEOUT_MS = 5000;
// How long the child's end is waited for once it is killed: a process in uninterruptible sleep
// does not die at once, and the service does not wait on it.
const EXIT_WAIT_MS = 1000;

// `count` duplicates of `server`'s listening socket, each a descriptor of its own. Node has no
// dup(2); its IPC passes a descriptor with SCM_RIGHTS, which the kernel duplicates into the
// receiving process. So a short-lived child of the same Node binary is sent the socket's handle
// and sends it back, once per duplicate, then is killed. The duplicates share the socket's accept
// queue; each is one more handle libuv polls and accepts from in a turn of the event loop (Node's
// cluster shares a socket with its workers the same way). Used where SO_REUSEPORT is not
// (docs/stations.md, "Listening sockets"). Rejects, never throws, when the child cannot be had.
export async function duplicateListeningHandle(server: NetServer, count: number): Promise<ListeningHandle[]> {
  const handle = (server as unknown as { _handle?: ListeningHandle | null })._handle;
  if (!handle) throw new Error('the server does not listen');
  // No environment: NODE_OPTIONS (a loader, a profiler) is the service's, not this child's.
  const child = spawn(process.execPath, ['-e', ECHO], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env: {} });
  // Why the child is gone, whichever comes first: its end, a spawn that failed (ENOENT, EAGAIN
  // under a process limit, EMFILE: 'error' and no 'exit'), or the time limit.
  let end: (why: string) => void = () => undefined;
  const ended = new Promise<string>((resolve) => (end = resolve));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', (code, signal) => end(`ended (${String(signal ?? code)})`));
  child.once('error', (error) => end(`could not be started (${error.message})`));
  const failed = ended.then((why) => {
    throw new Error(`the process that duplicates the socket ${why}`);
  });
  failed.catch(() => undefined);
  const timer = setTimeout(() => {
    end(`did not answer within ${ECHO_TIMEOUT_MS} ms`);
    child.kill('SIGKILL');
  }, ECHO_TIMEOUT_MS);
  const duplicates: ListeningHandle[] = [];
  try {
    // Without a process there is no IPC channel either (EMFILE): its error comes on the next turn.
    if (child.pid === undefined || typeof child.send !== 'function') await failed;
    for (let index = 0; index < count; index++) {
      const answer = new Promise<ListeningHandle | undefined>((resolve) => child.once('message', (_message, duplicate) => resolve(duplicate as ListeningHandle | undefined)));
      child.send({ index }, handle as Parameters<typeof child.send>[1], (error) => {
        if (error) child.kill('SIGKILL');
      });
      const duplicate = await Promise.race([answer, failed]);
      if (!duplicate) throw new Error('the process that duplicates the socket sent back no handle');
      duplicates.push(duplicate);
    }
    return duplicates;
  } catch (error) {
    closeHandles(duplicates);
    throw error;
  } finally {
    clearTimeout(timer);
    // Its own copies of the socket close with it; until then the port stays held by it too.
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, EXIT_WAIT_MS).unref())]);
    }
  }
}

export function closeHandles(handles: Iterable<ListeningHandle>): void {
  for (const handle of handles) (handle as { close?: () => void }).close?.();
}
