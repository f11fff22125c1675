// The service's list SQL, copied from src/payments/payments-repository.ts (the unscoped statement
// 'session_payments_list' as Drizzle renders it). pgbench runs exactly this text as the ceiling, so
// it MUST match the service: when the repository's list query changes, paste the new text here.
// The harness checks it on every PostgreSQL run by sampling pg_stat_activity while the service
// answers the list, and prints "list SQL: matches the service" or a warning.
export const SERVICE_LIST_SQL = `select "document" from "session_payments" where "session_payments"."session" = ANY($1::text[])`;

// Whitespace-insensitive comparison of two SQL texts.
export function normalizeSql(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

export interface PgbenchScriptOptions {
  // how many IDs per query, and how many of them exist (ses_bench_0 … ses_bench_<size-1>)
  ids: number;
  existing: number;
}

// A pgbench script running SERVICE_LIST_SQL with `ids` random session IDs per transaction. The
// service binds one text[] parameter ($1); pgbench can only set numeric variables, so $1 becomes
// ARRAY['ses_bench_' || :e1, …, 'ses_missing_' || :m1, …]::text[] (100 cheap concatenations,
// same plan shape: an index scan on session_payments_session_key with = ANY). pgbench also reads
// every ':name' in the text as a variable, including the ':' inside the to_char format literal,
// so those colons are written as the equal escape string E'…\x3a…' (same constant, same plan).
// Run with -D size=<seeded rows>.
export function pgbenchScript({ ids, existing }: PgbenchScriptOptions): string {
  const lines: string[] = [];
  const elements: string[] = [];
  for (let i = 1; i <= ids; i++) {
    if (i <= existing) {
      lines.push(`\\set e${i} random(0, :size - 1)`);
      elements.push(`'ses_bench_' || :e${i}`);
    } else {
      lines.push(`\\set m${i} random(1, 1000000000)`);
      elements.push(`'ses_missing_' || :m${i}`);
    }
  }
  const query = SERVICE_LIST_SQL.replace('$1::text[]', `ARRAY[${elements.join(', ')}]::text[]`).replace(
    /'YYYY-MM-DD"T"HH24:MI:SS\.MS"Z"'/g,
    `E'YYYY-MM-DD"T"HH24\\x3aMI\\x3aSS.MS"Z"'`,
  );
  if (query.includes('$1') || query.includes(':MI')) throw new Error('bench/list-sql.ts: could not adapt the list SQL for pgbench');
  lines.push(`${normalizeSql(query)};`);
  return `${lines.join('\n')}\n`;
}
