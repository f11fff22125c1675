import { sql, type AnyColumn, type SQL } from 'drizzle-orm';

// `column IN ('A', 'B')` for a CHECK constraint, from the same list that types the column and its
// Zod enum. A CHECK cannot take parameters, so the values are written as literals: they are
// constants of the code, never input.
export function isOneOf(column: AnyColumn, values: readonly string[]): SQL {
  const literals = values.map((value) => `'${value.replaceAll("'", "''")}'`).join(', ');
  return sql`${column} IN (${sql.raw(literals)})`;
}
