export type ReserveResult = 'ok' | 'insufficient';

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

/**
 * Token billing.
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - `reserve` is atomic: under any number of concurrent calls (and processes) the balance never goes below
 *   zero; it either holds the whole amount or nothing. Calling it again for the same generationId returns
 *   `ok` without holding more.
 * - `settle(generationId, amount)` charges `amount` (clamped to the reserve) and returns the rest of the reserve
 *   to the balance; `release(generationId)` is `settle(generationId, 0)`. Both are idempotent: a second call
 *   (a retry after a crash) changes nothing and returns the amount charged the first time. Settling an unknown
 *   generation returns null.
 * - For every user, `balance + reserved + settled` only changes through `credit`.
 */
export interface Ledger {
  reserve(userId: string, generationId: string, amount: number, now?: number): Promise<ReserveResult>;
  /** Returns the amount actually charged, or null when there is no reserve for that generation. */
  settle(generationId: string, amount: number): Promise<number | null>;
  release(generationId: string): Promise<number | null>;
  balance(userId: string): Promise<number>;
  /** Adds tokens to a user's balance (creating the account). Amount must be >= 0. */
  credit(userId: string, amount: number): Promise<void>;
  account(userId: string): Promise<AccountSnapshot>;
  /** Reserves neither settled nor released, oldest first (for recovery). */
  openReserves(limit: number): Promise<OpenReserve[]>;
}
