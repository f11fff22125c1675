// The part of fs-native-extensions (no typings of its own) that the DATA_DIR lock uses.
declare module 'fs-native-extensions' {
  // An exclusive lock on the whole file unless shared; false when another open file holds it.
  export function tryLock(fd: number, options?: { shared?: boolean }): boolean;
  export function unlock(fd: number): void;
}
