import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Server as NetServer } from 'node:net';

// A handle on a listening socket's file descriptor, as Node's IPC hands one over.
export type ListeningHandle = object;

// The child's whole program: send back every handle it is sent. It never listens on them (a raw
// handle arrives unopened), so it never accepts a connection meant for the service.
const ECHO = "process.on('message', (message, handle) => process.send(message, handle))";

const ECHO_TIMEOUT_MS = 5000;

// `count` duplicates of `server`'s listening socket, each a descriptor of its own. Node has no
// dup(2); its IPC passes a descriptor with SCM_RIGHTS, which the kernel duplicates into the
// receiving process. So a short-lived child of the same Node binary is sent the socket's handle
// and sends it back, once per duplicate, then exits. The duplicates share the socket's accept
// queue; each is one more handle libuv polls and accepts from in a turn of the event loop (Node's
// cluster shares a socket with its workers the same way). Used where SO_REUSEPORT is not
// (docs/stations.md, "Listening sockets").
export async function duplicateListeningHandle(server: NetServer, count: number): Promise<ListeningHandle[]> {
  const handle = (server as unknown as { _handle?: ListeningHandle | null })._handle;
  if (!handle) throw new Error('the server does not listen');
  // No environment: NODE_OPTIONS (a loader, a profiler) is the service's, not this child's.
  const child = spawn(process.execPath, ['-e', ECHO], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env: {} });
  const exited = once(child, 'exit');
  const failed = new Promise<never>((_resolve, reject) => {
    child.once('error', reject);
    void exited.then(([code, signal]) => reject(new Error(`the process that duplicates the socket ended (${String(signal ?? code)})`)));
  });
  failed.catch(() => undefined);
  const timer = setTimeout(() => child.kill('SIGKILL'), ECHO_TIMEOUT_MS);
  const duplicates: ListeningHandle[] = [];
  try {
    for (let index = 0; index < count; index++) {
      child.send({ index }, handle as Parameters<typeof child.send>[1]);
      const [, duplicate] = (await Promise.race([once(child, 'message'), failed])) as [unknown, ListeningHandle | undefined];
      if (!duplicate) throw new Error('the process that duplicates the socket sent back no handle');
      duplicates.push(duplicate);
    }
    return duplicates;
  } catch (error) {
    for (const duplicate of duplicates) (duplicate as { close?: () => void }).close?.();
    throw error;
  } finally {
    clearTimeout(timer);
    // Its own copies of the socket close with it; until then the port stays held by it too.
    if (child.pid !== undefined) {
      child.kill('SIGKILL');
      await exited;
    }
  }
}
