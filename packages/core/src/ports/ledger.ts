/**
 * `budget_exceeded`: the key's limit for the window would be passed (the balance was enough). `in_flight_limit`: the
 * user already has `maxInFlight` open reserves (only a ledger with `holdsInFlight` answers it).
 */
export type ReserveResult = 'ok' | 'insufficient' | 'budget_exceeded' | 'in_flight_limit';

export interface AccountSnapshot {
  /** Spendable tokens. */
  balance: number;
  /** Held by open reserves. */
  reserved: number;
  /** Charged by settled generations, over all time. */
  settled: number;
}

export interface OpenReserve {
  generationId: string;
  userId: string;
  amount: number;
  createdAt: number;
}

/** What a reserve is for, recorded with it for usage, and the key limit it must stay within. */
export interface ReserveOptions {
  modelId?: string;
  keyId?: string;
  /**
   * With `keyId`: the key's spend (held plus charged) in the window that starts at `windowStart` may reach at most
   * `amount` with this reserve. Which window applies is the caller's rule; the ledger only keeps it.
   */
  keyLimit?: { amount: number; windowStart: number };
  /**
   * The in-flight cap, kept by a ledger with `holdsInFlight` (ignored by one without): the user's open reserves (held,
   * neither settled nor released; a batch's count too), this one included, may be at most this many. The count is
   * kept on the user's account row and checked in the reserve's own atomic step, so racing reserves never pass it.
   * Every generation holds exactly one reserve from create until it finishes, so this is the count of the user's
   * unfinished generations that the store would otherwise count at insert (issue 36: one round trip less).
   */
  maxInFlight?: number;
}

/** One reserve of a `reserveMany`. */
export interface ReserveItem {
  generationId: string;
  amount: number;
  modelId?: string;
}

export type UsageGroupBy = 'day' | 'model' | 'key';

export interface UsageQuery {
  /** First UTC day counted, `YYYY-MM-DD`. */
  from: string;
  /** Last UTC day counted (inclusive), `YYYY-MM-DD`. */
  to: string;
  groupBy: UsageGroupBy;
}

export interface UsageRow {
  /** `day`: the UTC day as `YYYY-MM-DD`; `model` / `key`: the id, or null for reserves made without one. */
  group: string | null;
  /** Settled reserves (finished generations, charged or not). */
  count: number;
  /** Tokens charged. */
  tokens: number;
}

export interface UsageReport {
  rows: UsageRow[];
  total: { count: number; tokens: number };
}

/**
 * Token billing.
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - `reserve` is atomic: under any number of concurrent calls (and processes) the balance never goes below
 *   zero; it either holds the whole amount or nothing. Calling it again for the same generationId returns
 *   `ok` without holding more.
 * - With `options.keyLimit`, the key's spend in that window is held in the same atomic step as the balance: however
 *   many reserves race, it never passes the limit, and a refused reserve holds nothing on either.
 * - `settle(generationId, amount)` charges `amount` (clamped to the reserve) and returns the rest of the reserve
 *   to the balance and to the key's window it was held in; `release(generationId)` is `settle(generationId, 0)`. Both
 *   are idempotent: a second call (a retry after a crash) changes nothing and returns the amount charged the first
 *   time. Settling an unknown generation returns null.
 * - `reserveMany` holds every item's reserve or none, in one atomic step: the balance (and, with `keyLimit`, the
 *   key's window) must cover their total. Each reserve is then settled on its own like any other. Called again with
 *   the same items (a retry) it answers `ok` without holding more; an id reserved for another user throws.
 * - For every user, `balance + reserved + settled` only changes through `credit`.
 * - Amounts are bounded by `MAX_TOKENS` (2^53 - 1, `domain/amounts.ts`): `credit` and `openAccount` throw a
 *   RangeError, changing nothing, for an amount that is negative, not finite or above it, and `credit` does the same,
 *   in its own atomic step, when the account's `balance + reserved` would pass it. So no balance ever becomes
 *   non-finite, however many credits race.
 * - `usage` counts settled reserves by the UTC day they settled (the `now` of settle), from a rollup kept in the
 *   settle's own step, so its cost follows the days, models and keys asked about, never the number of generations.
 */
export interface Ledger {
  /**
   * True when `reserve` keeps the in-flight count (`ReserveOptions.maxInFlight`): the service then caps creates here,
   * in the reserve, and inserts without counting. A ledger without it (a host's own) leaves the cap to the store.
   */
  readonly holdsInFlight?: boolean;
  reserve(userId: string, generationId: string, amount: number, now?: number, options?: ReserveOptions): Promise<ReserveResult>;
  /** All of `items` or nothing (a batch); `options.modelId` is ignored (each item names its own). */
  reserveMany(userId: string, items: readonly ReserveItem[], now?: number, options?: ReserveOptions): Promise<ReserveResult>;
  /** Returns the amount actually charged, or null when there is no reserve for that generation. */
  settle(generationId: string, amount: number, now?: number): Promise<number | null>;
  release(generationId: string, now?: number): Promise<number | null>;
  balance(userId: string): Promise<number>;
  /**
   * Adds tokens to a user's balance (creating the account). Amount must be from 0 to `MAX_TOKENS`, and the account's
   * balance plus reserved must stay within `MAX_TOKENS` (else a RangeError, nothing changed).
   */
  credit(userId: string, amount: number): Promise<void>;
  /**
   * Creates the account with `balance` when the user has none, atomically: true when it did, false (changing
   * nothing) when the account exists. Amount must be from 0 to `MAX_TOKENS`.
   */
  openAccount(userId: string, balance: number): Promise<boolean>;
  account(userId: string): Promise<AccountSnapshot>;
  /** Reserves neither settled nor released, oldest first (for recovery). */
  openReserves(limit: number): Promise<OpenReserve[]>;
  /** A key's spend (held plus charged) in the window starting at `windowStart`. */
  keySpend(keyId: string, windowStart: number): Promise<number>;
  /** A user's settled spend on the days `from` to `to`, grouped. */
  usage(userId: string, query: UsageQuery): Promise<UsageReport>;
}
