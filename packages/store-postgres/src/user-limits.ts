import type { BudgetWindows, UserLimits, UserLimitState } from '@genservice/core/ports';
import { organizationWindowStart } from '@genservice/core/ports';
import { type PgDatabase, type Queryable, encodeKey, num } from './db.js';

/** The statements of users' own limits, given the quoted schema. */
export function userLimitSql(s: string): Record<'set' | 'read' | 'hold', string> {
  return {
    // A changed period starts the count again (its old window is not the new one's); open reserves counted in the
    // old window then give nothing back to it (the settle's window test).
    set: `INSERT INTO ${s}.user_limits (user_id, budget_amount, budget_period, max_in_flight) VALUES ($1, $2, $3, $4)
      ON CONFLICT (user_id) DO UPDATE SET budget_amount = EXCLUDED.budget_amount, budget_period = EXCLUDED.budget_period,
        max_in_flight = EXCLUDED.max_in_flight,
        spent = CASE WHEN ${s}.user_limits.budget_period IS NOT DISTINCT FROM EXCLUDED.budget_period THEN ${s}.user_limits.spent ELSE 0 END,
        spent_window = CASE WHEN ${s}.user_limits.budget_period IS NOT DISTINCT FROM EXCLUDED.budget_period THEN ${s}.user_limits.spent_window ELSE 0 END`,
    read: `SELECT budget_amount, budget_period, max_in_flight, in_flight, spent, spent_window FROM ${s}.user_limits WHERE user_id = $1`,
    // As an organisation's hold: one row holds the count and the budget's spend in its window ($4 the day's start,
    // $5 the month's, picked by the period). The row lock serialises the user's reserves; the cap and the budget are
    // tested on what this answers (the caller rolls back past them), and the reserves are marked in the same statement.
    hold: `WITH u AS (
        UPDATE ${s}.user_limits ul SET
          in_flight = ul.in_flight + $2,
          spent = CASE WHEN ul.budget_amount IS NULL THEN ul.spent
            WHEN w.start > ul.spent_window THEN $3::numeric ELSE ul.spent + $3::numeric END,
          spent_window = CASE WHEN ul.budget_amount IS NULL THEN ul.spent_window ELSE GREATEST(ul.spent_window, w.start) END
        FROM (SELECT CASE budget_period WHEN 'day' THEN $4::bigint WHEN 'month' THEN $5::bigint ELSE 0 END AS start
              FROM ${s}.user_limits WHERE user_id = $1) w
        WHERE ul.user_id = $1
        RETURNING ul.budget_amount, ul.budget_period, ul.max_in_flight, ul.in_flight, ul.spent, ul.spent_window
      ), m AS (
        UPDATE ${s}.reserves rs SET user_limited = true, user_window = CASE WHEN u.budget_amount IS NULL THEN NULL ELSE u.spent_window END
        FROM u WHERE rs.generation_id = ANY($6::text[])
        RETURNING 1
      )
      SELECT * FROM u`,
  };
}

/**
 * The settle's part for the user's own limits: a CTE over `r` after the organisation's (`o`), so a settle takes the
 * user's row last, in the reserve's order. The unspent part goes back while the reserve's window is still the row's.
 */
export function settleUserCtes(s: string): string {
  return `, ul AS (
        UPDATE ${s}.user_limits ul SET in_flight = ul.in_flight - 1,
          spent = CASE WHEN r.user_window IS NOT NULL AND ul.spent_window = r.user_window THEN ul.spent - (r.amount - r.charged) ELSE ul.spent END
        FROM r WHERE r.user_limited AND ul.user_id = r.user_id AND (SELECT count(*) FROM o) >= 0
        RETURNING 1
      )`;
}

interface LimitsRow {
  budget_amount: string | null;
  budget_period: 'day' | 'month' | 'total' | null;
  max_in_flight: number | null;
  in_flight: number;
  spent: string;
  spent_window: string;
}

function limitsOf(row: LimitsRow): UserLimits {
  const limits: UserLimits = {};
  if (row.budget_amount !== null && row.budget_period !== null) limits.budget = { amount: num(row.budget_amount), period: row.budget_period };
  if (row.max_in_flight !== null) limits.maxInFlight = Number(row.max_in_flight);
  return limits;
}

/** Why a reserve rolled back at the user's own limits: the caller answers it as a refusal. */
export class UserRefused extends Error {
  override readonly name = 'UserRefused' as const;
  constructor(
    readonly result: 'limit_reached' | 'budget_exceeded',
    readonly limits: UserLimits,
  ) {
    super(result);
  }
}

/**
 * Holds `generationIds` (already inserted, `amount` in all) on the user's own limits inside the reserve's transaction,
 * last (after the account, the key and the organisation). Throws `UserRefused` (rolling the reserve back) when the cap
 * or the budget would be passed; answers the limits, or undefined for a user without any.
 */
export async function holdOnUser(
  tx: Queryable,
  sql: ReturnType<typeof userLimitSql>,
  userId: string,
  generationIds: readonly string[],
  amount: number,
  windows: BudgetWindows | undefined,
): Promise<UserLimits | undefined> {
  const w = windows ?? { day: 0, month: 0 };
  const { rows } = await tx.query<LimitsRow>(sql.hold, [userId, generationIds.length, amount, Math.trunc(w.day), Math.trunc(w.month), generationIds]);
  const row = rows[0];
  if (!row) return undefined;
  const limits = limitsOf(row);
  if (limits.maxInFlight !== undefined && Number(row.in_flight) > limits.maxInFlight) throw new UserRefused('limit_reached', limits);
  if (limits.budget && num(row.spent) > limits.budget.amount) throw new UserRefused('budget_exceeded', limits);
  return limits;
}

/** The `UserLimitLedger` methods of the Postgres ledger. */
export class PostgresUserLimits {
  readonly sql: ReturnType<typeof userLimitSql>;

  constructor(private readonly db: PgDatabase) {
    this.sql = userLimitSql(db.s);
  }

  async set(userId: string, limits: UserLimits): Promise<void> {
    await this.db.query(this.sql.set, [encodeKey(userId), limits.budget?.amount ?? null, limits.budget?.period ?? null, limits.maxInFlight ?? null]);
  }

  async state(userId: string, windows: BudgetWindows): Promise<UserLimitState | null> {
    const { rows } = await this.db.query<LimitsRow>(this.sql.read, [encodeKey(userId)]);
    const row = rows[0];
    if (!row) return null;
    const limits = limitsOf(row);
    // The row's window is the latest any reserve counted in: older than the current one, nothing is spent in it yet.
    const spent = limits.budget && num(row.spent_window) >= organizationWindowStart(limits.budget.period, windows) ? num(row.spent) : 0;
    return { limits, inFlight: Number(row.in_flight), spent };
  }
}
