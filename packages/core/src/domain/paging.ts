/** Pages of generations, newest first, with opaque cursors: the one paging rule of every list. */
import { DomainError } from './errors.js';
import { GENERATION_ID_PATTERN } from './ids.js';
import type { GenerationRecord } from './types.js';
import type { ListCursor } from '../ports/store.js';

/** Opaque to clients: base64url of `[createdAt, id]` of the page's last item. */
export function encodeCursor(c: ListCursor): string {
  return Buffer.from(JSON.stringify([c.createdAt, c.id])).toString('base64url');
}

export function decodeCursor(cursor: string): ListCursor | null {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) return null;
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string' && GENERATION_ID_PATTERN.test(v[1])) {
      return { createdAt: v[0] as number, id: v[1] };
    }
  } catch {
    // not JSON: answered below like any other bad cursor
  }
  return null;
}

/** What a client asks of a list: how many (default 20) and from where (a `nextCursor`). */
export interface PageRequest {
  limit?: number;
  cursor?: string;
}

/** One page of items and the cursor of the next (null on the last page). */
export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

/**
 * Reads one page: asks `read` for one more row than the page holds (which tells whether another page follows without
 * a count), after the cursor's position. Throws invalid_request for a cursor that no page gave.
 */
export async function readPage<T>(
  request: PageRequest,
  read: (query: { limit: number; before?: ListCursor }) => Promise<GenerationRecord[]>,
  item: (rec: GenerationRecord) => T,
): Promise<Page<T>> {
  const limit = request.limit ?? 20;
  const before = request.cursor === undefined ? undefined : decodeCursor(request.cursor);
  if (before === null) {
    throw new DomainError('invalid_request', 'cursor is not valid.', { details: [{ field: 'cursor', code: 'invalid_value', message: 'must be a nextCursor from a previous page' }] });
  }
  const rows = await read({ limit: limit + 1, ...(before !== undefined ? { before } : {}) });
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    data: page.map(item),
    nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
  };
}
