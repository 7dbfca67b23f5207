/**
 * The bound on token amounts: the one rule, asked by `service.accounts` (a 400 past it) and by every ledger (which
 * refuses, atomically, a credit that would pass it).
 *
 * 2^53 - 1 (`Number.MAX_SAFE_INTEGER`): the largest integer every ledger holds exactly (an IEEE double in memory and
 * in SQLite's REAL, `numeric` read back as a double in Postgres). A credit, a starting balance and a key budget are
 * each at most this, and so is what an account holds, its balance plus its open reserves (a reserve given back returns
 * to the balance): a balance can therefore never become Infinity, or lose whole tokens to rounding. Fractions of a
 * token stay allowed, as before.
 */
export const MAX_TOKENS = Number.MAX_SAFE_INTEGER;

/** Whether `amount` is a token amount a ledger accepts: a finite number from 0 to `MAX_TOKENS`. */
export function isTokenAmount(amount: unknown): amount is number {
  return typeof amount === 'number' && amount >= 0 && amount <= MAX_TOKENS;
}

/**
 * Throws a RangeError unless `amount` is a token amount (`what` names it in the message): what a ledger's `credit`
 * and `openAccount` throw for an amount out of bounds.
 */
export function assertTokenAmount(amount: number, what: string): void {
  if (!isTokenAmount(amount)) throw new RangeError(`${what} must be a number from 0 to ${MAX_TOKENS}, got ${String(amount)}`);
}

/**
 * Whether an account holding `held` tokens (its balance plus its open reserves) may be credited `amount`: what it holds
 * then stays within `MAX_TOKENS`. SQL ledgers test the same inequality in the credit's own statement.
 */
export function creditFits(held: number, amount: number): boolean {
  return isTokenAmount(amount) && held + amount <= MAX_TOKENS;
}
