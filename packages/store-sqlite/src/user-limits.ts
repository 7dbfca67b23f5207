import type { BudgetWindows, UserLimits, UserLimitState } from '@genservice/core/ports';
import { organizationWindowStart } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

interface LimitsRow {
  budget_amount: number | null;
  budget_period: 'day' | 'month' | 'total' | null;
  max_in_flight: number | null;
  in_flight: number;
}

/** What a reserve keeps of its owner's own limits, so that its settle gives back there. */
export interface UserReserveColumns {
  user_limited: number;
  user_window: number | null;
}

/** Thrown inside a reserve's transaction to roll it back when the user's own cap or budget refuses it. */
export class UserRefused extends Error {
  override readonly name = 'UserRefused' as const;
  constructor(
    readonly result: 'limit_reached' | 'budget_exceeded',
    readonly limits: UserLimits,
  ) {
    super(result);
  }
}

function limitsOf(row: LimitsRow): UserLimits {
  const limits: UserLimits = {};
  if (row.budget_amount !== null && row.budget_period !== null) limits.budget = { amount: row.budget_amount, period: row.budget_period };
  if (row.max_in_flight !== null) limits.maxInFlight = row.max_in_flight;
  return limits;
}

/**
 * The SQLite ledger's users' own limits. `hold` and `settled` run inside the ledger's IMMEDIATE transactions (the
 * database's write lock is held), so the cap and the budget are tested and written with every other level.
 */
export class SqliteUserLimits {
  private readonly setStmt: Statement;
  private readonly rowStmt: Statement;
  private readonly spentStmt: Statement;
  private readonly holdStmt: Statement;
  private readonly holdSpendStmt: Statement;
  private readonly markStmt: Statement;
  private readonly releaseStmt: Statement;
  private readonly releaseSpendStmt: Statement;

  constructor(db: SqliteDatabase) {
    this.setStmt = db.prepare(
      `INSERT INTO user_limits (user_id, budget_amount, budget_period, max_in_flight) VALUES (@userId, @amount, @period, @cap)
       ON CONFLICT (user_id) DO UPDATE SET budget_amount = excluded.budget_amount, budget_period = excluded.budget_period, max_in_flight = excluded.max_in_flight`,
    );
    this.rowStmt = db.prepare('SELECT budget_amount, budget_period, max_in_flight, in_flight FROM user_limits WHERE user_id = ?');
    this.spentStmt = db.prepare('SELECT spent FROM user_spend WHERE user_id = ? AND window_start = ?');
    this.holdStmt = db.prepare('UPDATE user_limits SET in_flight = in_flight + ? WHERE user_id = ?');
    this.holdSpendStmt = db.prepare(
      `INSERT INTO user_spend (user_id, window_start, spent) VALUES (@userId, @window, @amount)
       ON CONFLICT (user_id, window_start) DO UPDATE SET spent = spent + excluded.spent WHERE spent + excluded.spent <= @limit`,
    );
    this.markStmt = db.prepare('UPDATE reserves SET user_limited = 1, user_window = ? WHERE generation_id = ?');
    this.releaseStmt = db.prepare('UPDATE user_limits SET in_flight = in_flight - 1 WHERE user_id = ?');
    this.releaseSpendStmt = db.prepare('UPDATE user_spend SET spent = spent - ? WHERE user_id = ? AND window_start = ?');
  }

  /**
   * Inside a reserve's transaction: the user's cap and budget window held for `generationIds` (already inserted), or
   * `UserRefused` thrown. Undefined for a user without limits.
   */
  hold(userId: string, generationIds: readonly string[], amount: number, windows: BudgetWindows | undefined): UserLimits | undefined {
    const row = this.rowStmt.get(userId) as LimitsRow | undefined;
    if (!row) return undefined;
    const limits = limitsOf(row);
    if (limits.maxInFlight !== undefined && row.in_flight + generationIds.length > limits.maxInFlight) throw new UserRefused('limit_reached', limits);
    let window: number | null = null;
    if (limits.budget) {
      window = organizationWindowStart(limits.budget.period, windows ?? { day: 0, month: 0 });
      const held = amount <= limits.budget.amount && this.holdSpendStmt.run({ userId, window, amount, limit: limits.budget.amount }).changes === 1;
      if (!held) throw new UserRefused('budget_exceeded', limits);
    }
    this.holdStmt.run(generationIds.length, userId);
    for (const id of generationIds) this.markStmt.run(window, id);
    return limits;
  }

  /** Inside a settle's transaction: the slot and the unspent part given back. */
  settled(reserve: UserReserveColumns & { user_id: string; amount: number }, charged: number): void {
    if (reserve.user_limited !== 1) return;
    this.releaseStmt.run(reserve.user_id);
    if (reserve.user_window !== null) this.releaseSpendStmt.run(reserve.amount - charged, reserve.user_id, reserve.user_window);
  }

  /** The user's limits (a retried reserve's answer), or undefined. */
  of(userId: string): UserLimits | undefined {
    const row = this.rowStmt.get(userId) as LimitsRow | undefined;
    return row ? limitsOf(row) : undefined;
  }

  set(userId: string, limits: UserLimits): void {
    this.setStmt.run({ userId, amount: limits.budget?.amount ?? null, period: limits.budget?.period ?? null, cap: limits.maxInFlight ?? null });
  }

  state(userId: string, windows: BudgetWindows): UserLimitState | null {
    const row = this.rowStmt.get(userId) as LimitsRow | undefined;
    if (!row) return null;
    const limits = limitsOf(row);
    const spent = limits.budget
      ? ((this.spentStmt.get(userId, organizationWindowStart(limits.budget.period, windows)) as { spent: number } | undefined)?.spent ?? 0)
      : 0;
    return { limits, inFlight: row.in_flight, spent };
  }
}
