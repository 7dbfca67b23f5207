import { z } from 'zod';
import { DomainError, type ErrorDetail } from '../domain/errors.js';

/** The input checks the account use cases share (Accounts, Organizations): one 400 shape, naming every bad field. */

/**
 * No control characters: ids and names end up in logs, headers of tools and the audit log. No lone UTF-16 half either
 * (as `isStorableText` of the HTTP layer): not every store keeps one as given (SQLite reads it back as U+FFFD, so two
 * such ids read back alike and neither as it was created; Postgres escapes ids, not names or reasons).
 */
export const PRINTABLE = /^(?:[^\u0000-\u001f\u007f\uD800-\uDFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF])+$/;

export const userIdSchema = z.string().min(1).max(200).regex(PRINTABLE);

/** The longest span `usage` answers for, in days (a leap year). */
export const USAGE_MAX_DAYS = 366;
/** The days `usage` covers when `from` is not given: the last 30, today included. */
export const USAGE_DEFAULT_DAYS = 30;

const DAY_MS = 86_400_000;

/** The days a usage report covers: `to` (default today, UTC) and `from` (default 30 days before), checked. */
export function usageDays(q: { from?: string | undefined; to?: string | undefined }, now: number): { from: string; to: string } {
  const today = new Date(Math.floor(now / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
  const to = q.to ?? today;
  const from = q.from ?? new Date(Date.parse(to) - (USAGE_DEFAULT_DAYS - 1) * DAY_MS).toISOString().slice(0, 10);
  const span = (Date.parse(to) - Date.parse(from)) / DAY_MS + 1;
  if (span < 1) throw invalid([{ field: 'from', code: 'invalid_value', message: 'from must not be after to' }]);
  if (span > USAGE_MAX_DAYS) {
    throw invalid([{ field: 'from', code: 'invalid_value', message: `from and to may be at most ${USAGE_MAX_DAYS} days apart` }]);
  }
  return { from, to };
}

export function checkUserId(userId: string): string {
  const parsed = userIdSchema.safeParse(userId);
  if (!parsed.success) throw invalid([{ field: 'userId', code: 'invalid_value', message: 'userId must be 1 to 200 printable characters' }]);
  return parsed.data;
}

/**
 * What this service's own ports cannot do (a host's resolver that keeps no key objects, a ledger without organisations
 * or user limits): a 404 saying what is missing, as `GET /v1/admin/users` answers for a ledger that cannot list its
 * accounts. It is the configuration the request cannot be served on, never a fault of the service (a 500).
 */
export function unsupported(message: string): DomainError {
  return new DomainError('not_found', message);
}

export function invalid(details: ErrorDetail[]): DomainError {
  return new DomainError('invalid_request', `The request is not valid: ${details.map((d) => d.message).join('; ')}.`, { details });
}

/** Parses `input` or throws a 400 naming every bad field (its dotted path). */
export function check<T extends z.ZodType>(schema: T, input: unknown): z.output<T> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw invalid([{ field: 'body', code: 'invalid_type', message: 'the body must be a JSON object' }]);
  }
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const all = parsed.error.issues.slice(0, 50).map((i): ErrorDetail => {
    const field = i.path.length > 0 ? i.path.map(String).join('.') : 'body';
    const missing = i.code === 'invalid_type' && i.input === undefined;
    if (i.code === 'unrecognized_keys') {
      return { field: i.keys.join(','), code: 'invalid_value', message: `unknown field${i.keys.length > 1 ? 's' : ''} ${i.keys.join(', ')}` };
    }
    return { field, code: missing ? 'required' : 'invalid_value', message: missing ? `${field} is required` : `${field}: ${i.message}` };
  });
  // One detail per field (a string that is empty and has a bad character is one mistake to its sender).
  throw invalid(all.filter((d, i) => all.findIndex((e) => e.field === d.field) === i));
}
