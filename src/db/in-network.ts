import { and, eq, type AnyColumn, type SQL } from 'drizzle-orm';
import type { NetworkScope } from '../kernel/network-scope.js';

// The WHERE of a lookup made for a caller: the conditions given, and the caller's network unless
// it may see every network. Undefined when there is nothing to filter.
export function inNetwork(column: AnyColumn, scope: NetworkScope, ...conditions: (SQL | undefined)[]): SQL | undefined {
  return and(...conditions, scope.network === null ? undefined : eq(column, scope.network));
}
