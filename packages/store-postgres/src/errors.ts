import { UnavailableError } from '@genservice/core/ports';

/**
 * Node socket errors and SQLSTATEs that mean "the database could not be reached or went away", as opposed to a
 * query the database rejected. Only these become UnavailableError (503): a constraint violation is a bug or a
 * conflict, and answering it as "try again later" would hide it.
 */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

const SQLSTATES = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, recovery)
  '53300', // too_many_connections
]);

// pg reports these as plain Errors without a code.
const MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /cannot use a pool after calling end/i,
  /client has encountered a connection error/i,
  /client was closed and is not queryable/i,
  /connection is closed/i,
];

export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code) || SQLSTATES.has(code)) return true;
    // Class 08: connection exception.
    if (/^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  // Node's happy-eyeballs connect reports one failure per address inside an AggregateError.
  if (err instanceof AggregateError && err.errors.some(isConnectionError)) return true;
  return MESSAGES.some((re) => re.test(err.message));
}

/** Rethrows a connection failure as UnavailableError so the HTTP layer answers 503; anything else unchanged. */
export function mapPgError(err: unknown): unknown {
  if (err instanceof UnavailableError) return err;
  if (isConnectionError(err)) {
    return new UnavailableError('The database is unavailable.', { cause: err });
  }
  return err;
}
