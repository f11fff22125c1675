// Lists page by `limit` and `startingAfter` (the last id seen), in id order.
export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

export interface PageOptions {
  limit: number;
  startingAfter?: string | undefined;
}

// Repositories are asked for one row more than the page holds: that row answers hasMore without
// a count query.
export function rowsToFetch(options: PageOptions): number {
  return options.limit + 1;
}

export function paginate<Row, Item>(rows: readonly Row[], limit: number, toItem: (row: Row) => Item): Page<Item> {
  return { items: rows.slice(0, limit).map(toItem), hasMore: rows.length > limit };
}
