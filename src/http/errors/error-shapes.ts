// A family's error shapes, said once: a table from status to the Zod object its body is, with what
// the status means when an operation says no more. The family's renderer takes its codes and types
// from the table, its routes take their response schemas from it, and the API reference's tag
// sentence about errors is written from it (describeErrorShapes).
import { z } from 'zod';

export interface ErrorAnswer {
  body: z.ZodObject;
  means: string;
}

export type ErrorTable = Readonly<Record<number, ErrorAnswer>>;

// The body every family gives 401, 429 and 431, and the routes of no family every status.
export const messageBody = z.object({ message: z.string() });

// What the API reference says a route of no family may answer.
export const PLAIN_ERRORS = {
  429: { body: messageBody, means: 'Too many requests; retry after Retry-After seconds' },
  500: { body: messageBody, means: 'Internal failure (details are in the log, under the request id)' },
  503: { body: messageBody, means: 'The database cannot answer now; retry after Retry-After seconds' },
} as const satisfies ErrorTable;

// The responses an operation documents for these statuses, each with the table's meaning.
export function documentedErrors<Table extends ErrorTable>(table: Table, statuses: readonly (keyof Table & number)[]): Record<number, z.ZodType> {
  return Object.fromEntries(statuses.map((status) => [status, table[status]!.body.describe(table[status]!.means)]));
}

// The statuses whose body fixes `member` to one string (payments' code, asset management's type),
// with that string: what the renderer writes for the status.
export function fixedMembers(table: ErrorTable, member: string): ReadonlyMap<number, string> {
  const fixed = new Map<number, string>();
  for (const [status, { body }] of Object.entries(table)) {
    const schema = body.shape[member];
    if (schema instanceof z.ZodLiteral && typeof schema.value === 'string') fixed.set(Number(status), schema.value);
  }
  return fixed;
}

function shapeText(body: z.ZodObject): string {
  return `\`{ ${Object.keys(body.shape).join(', ')} }\``;
}

function statusList(statuses: number[]): string {
  return statuses.length === 1 ? String(statuses[0]) : `${statuses.slice(0, -1).join(', ')} and ${statuses.at(-1)}`;
}

// One sentence for the API reference: the body most statuses take, then the others with their
// statuses ("Errors: `{ code, message, status }`; `{ message }` for 401 and 429.").
export function describeErrorShapes(table: ErrorTable): string {
  const byShape = new Map<string, number[]>();
  for (const [status, { body }] of Object.entries(table)) {
    const text = shapeText(body);
    byShape.set(text, [...(byShape.get(text) ?? []), Number(status)]);
  }
  // The shape most statuses take (on a tie, the lowest status's); the others by their lowest status.
  const shapes = [...byShape];
  const common = shapes.reduce((most, shape) => (shape[1].length > most[1].length ? shape : most));
  const others = shapes.filter((shape) => shape !== common);
  return `${['Errors: ' + common[0], ...others.map(([text, statuses]) => `${text} for ${statusList(statuses)}`)].join('; ')}.`;
}
