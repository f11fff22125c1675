// How the lists of the `{ data }` families page (docs/api.md, "Paging"): `limit` and
// `startingAfter` (the last id seen), answered `{ data: { items, hasMore } }`; the `{ data }`
// envelope of one record; and the body of an action that takes none. Used by asset management's
// and the webhooks' schemas.
import { z } from 'zod';

const DEFAULT_PAGE_SIZE = 20;

// Digits only: z.coerce.number() would also take " 5", "5.0" and "0x10".
export const pageLimit = z
  .string()
  .regex(/^(100|[1-9][0-9]?)$/, 'must be an integer from 1 to 100')
  .transform(Number)
  .default(DEFAULT_PAGE_SIZE)
  .describe(`1 to 100, default ${DEFAULT_PAGE_SIZE}`);

export const page = <T extends z.ZodType>(item: T) => z.object({ data: z.object({ items: z.array(item), hasMore: z.boolean() }) });

export const envelope = <T extends z.ZodType>(item: T) => z.object({ data: item });

// No body, or an empty object; anything else is an unknown field.
export const emptyBody = z.object({}).strict().nullish().meta({ examples: [{}] });
