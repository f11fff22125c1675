import type { Db } from '../../src/db/database.js';

// A Db that counts db.select() calls: the repositories under test make one per load.
export function countingDb(db: Db) {
  const counter = { selects: 0 };
  const proxy = new Proxy(db, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop === 'select' && typeof value === 'function') {
        return (...args: unknown[]) => {
          counter.selects++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return value;
    },
  });
  return { db: proxy, counter };
}
