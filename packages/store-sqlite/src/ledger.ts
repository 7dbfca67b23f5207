import { retryMethodsWhileBusy } from './busy.js';
import type {
  AccountRow,
  AccountSnapshot,
  BudgetWindows,
  Ledger,
  OpenReserve,
  OpenReserveCursor,
  OrganizationLedger,
  OrganizationMember,
  OrganizationLimits,
  OrganizationRecord,
  OrganizationRole,
  OrganizationState,
  OrganizationUsageQuery,
  ReserveItem,
  ReserveOptions,
  ReserveOutcome,
  ReserveResult,
  UsageQuery,
  UsageReport,
  UserLimitLedger,
  UserLimits,
  UserLimitState,
} from '@genservice/core/ports';
import { MAX_TOKENS, USAGE_SPANS, assertTokenAmount, dayIndexOf, groupUsage, usageCover, usageDayIndex, usageDayOfIndex } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';
import { type OrganizationReserveColumns, OrganizationRefused, SqliteOrganizations } from './organizations.js';
import { type UserReserveColumns, SqliteUserLimits, UserRefused } from './user-limits.js';

type Statement = Database.Statement;

interface ReserveRow extends OrganizationReserveColumns, UserReserveColumns {
  user_id: string;
  amount: number;
  state: 'open' | 'settled';
  charged: number | null;
  model_id: string | null;
  key_id: string | null;
  window_start: number | null;
  key_in_flight: number;
}

/** Thrown inside a reserve's transaction to roll back its balance hold when the key's budget refuses it. */
class OverBudget extends Error {
  override readonly name = 'OverBudget' as const;
}

/** Thrown inside a reserve's transaction to roll it back when the key is at its in-flight cap. */
class KeyAtCap extends Error {
  override readonly name = 'KeyAtCap' as const;
}

/** Same condition as the partial index `reserves_open`, so only open reserves are ever visited. */
export const OPEN_RESERVES_SQL = `SELECT generation_id, user_id, amount, created_at FROM reserves
  WHERE state = 'open'
  ORDER BY created_at, generation_id
  LIMIT ?`;

/** The next page of `OPEN_RESERVES_SQL`: those after the last one read, in the same order (a row value). */
export const OPEN_RESERVES_AFTER_SQL = `SELECT generation_id, user_id, amount, created_at FROM reserves
  WHERE state = 'open' AND (created_at, generation_id) > (?, ?)
  ORDER BY created_at, generation_id
  LIMIT ?`;

/** A user's usage on days `?` to `?` from the daily rollup (exported for the query-plan test). */
export function usageSql(groupBy: UsageQuery['groupBy']): string {
  // By day: each day's totals (usage_days, one row per day however many models and keys: issue 36).
  if (groupBy === 'day') return 'SELECT day AS g, count, tokens FROM usage_days WHERE user_id = ? AND day BETWEEN ? AND ?';
  // By model or key (issue 36): the days at the ends, whole 8-day spans and 64-day spans between, as core's
  // usageCover splits the range (an empty part is 1..0). Parameters: the user before each part's bounds.
  const column = groupBy === 'model' ? 'model_id' : 'key_id';
  return `SELECT g, sum(count) AS count, total(tokens) AS tokens FROM (
      SELECT ${column} AS g, count, tokens FROM usage_daily
        WHERE user_id = ? AND (day BETWEEN ? AND ? OR day BETWEEN ? AND ?)
      UNION ALL
      SELECT ${column}, count, tokens FROM usage_spans
        WHERE user_id = ? AND span = 8 AND (start BETWEEN ? AND ? OR start BETWEEN ? AND ?)
      UNION ALL
      SELECT ${column}, count, tokens FROM usage_spans
        WHERE user_id = ? AND span = 64 AND start BETWEEN ? AND ?
    ) GROUP BY g`;
}

/**
 * Ledger on SQLite, safe to share between processes.
 *
 * Each operation is one IMMEDIATE transaction: it takes the database's write lock before reading, so no other
 * connection (in this process or another) can slip a write between the check and the update. The balance test
 * itself lives in the UPDATE's WHERE (`balance >= amount`) and a CHECK constraint backs it, so even a logic
 * slip could not drive a balance below zero. `accounts` carries running totals, so `account()` is one row read.
 */
export class SqliteLedger implements Ledger, OrganizationLedger, UserLimitLedger {
  private readonly orgs: SqliteOrganizations;
  private readonly users: SqliteUserLimits;
  private readonly findReserveStmt: Statement;
  private readonly ensureAccountStmt: Statement;
  private readonly holdStmt: Statement;
  private readonly insertReserveStmt: Statement;
  private readonly closeReserveStmt: Statement;
  private readonly applySettleStmt: Statement;
  private readonly creditStmt: Statement;
  private readonly accountStmt: Statement;
  private readonly listAccountsStmt: Statement;
  private readonly openReservesStmt: Statement;
  private readonly openReservesAfterStmt: Statement;
  private readonly openAccountStmt: Statement;
  private readonly holdKeyStmt: Statement;
  private readonly releaseKeyStmt: Statement;
  private readonly keySpendStmt: Statement;
  private readonly holdKeyInFlightStmt: Statement;
  private readonly releaseKeyInFlightStmt: Statement;
  private readonly addUsageStmt: Statement;
  private readonly addSpanStmt: Statement;
  private readonly addDayStmt: Statement;
  private readonly usageStmts: Record<UsageQuery['groupBy'], Statement>;
  private readonly reserveTx: (
    userId: string,
    generationId: string,
    amount: number,
    now: number,
    options: ReserveOptions,
  ) => ReserveResult | ReserveOutcome;
  private readonly settleTx: (generationId: string, amount: number, now: number, counted: boolean) => number | null;
  private readonly reserveManyTx: (userId: string, items: readonly ReserveItem[], now: number, options: ReserveOptions) => ReserveResult | ReserveOutcome;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    this.orgs = new SqliteOrganizations(db);
    this.users = new SqliteUserLimits(db);
    this.findReserveStmt = db.prepare(
      `SELECT user_id, amount, state, charged, model_id, key_id, window_start, organization_id, organization_window, key_in_flight, user_limited, user_window
         FROM reserves WHERE generation_id = ?`,
    );
    this.ensureAccountStmt = db.prepare('INSERT INTO accounts (user_id) VALUES (?) ON CONFLICT (user_id) DO NOTHING');
    this.holdStmt = db.prepare(
      `UPDATE accounts SET balance = balance - @amount, reserved = reserved + @amount
        WHERE user_id = @userId AND balance >= @amount`,
    );
    this.insertReserveStmt = db.prepare(
      `INSERT INTO reserves (generation_id, user_id, amount, state, created_at, model_id, key_id, window_start, key_in_flight)
       VALUES (@generationId, @userId, @amount, 'open', @now, @modelId, @keyId, @windowStart, @keyCounted)`,
    );
    this.closeReserveStmt = db.prepare(
      `UPDATE reserves SET state = 'settled', charged = @charged, settled_at = @now
        WHERE generation_id = @generationId AND state = 'open'`,
    );
    this.applySettleStmt = db.prepare(
      `UPDATE accounts
          SET reserved = reserved - @amount, settled = settled + @charged, balance = balance + (@amount - @charged)
        WHERE user_id = @userId`,
    );
    // The bound is tested in the upsert's WHERE: a credit that would take balance plus reserved past it changes no row.
    this.creditStmt = db.prepare(
      `INSERT INTO accounts (user_id, balance) VALUES (@userId, @amount)
       ON CONFLICT (user_id) DO UPDATE SET balance = balance + excluded.balance
       WHERE balance + reserved + excluded.balance <= @max`,
    );
    this.openAccountStmt = db.prepare('INSERT INTO accounts (user_id, balance) VALUES (?, ?) ON CONFLICT (user_id) DO NOTHING');
    this.accountStmt = db.prepare('SELECT balance, reserved, settled FROM accounts WHERE user_id = ?');
    // The primary key's index, in its own (binary) order.
    this.listAccountsStmt = db.prepare('SELECT user_id AS userId, balance, reserved, settled FROM accounts WHERE user_id > ? ORDER BY user_id LIMIT ?');
    this.openReservesStmt = db.prepare(OPEN_RESERVES_SQL);
    this.openReservesAfterStmt = db.prepare(OPEN_RESERVES_AFTER_SQL);
    // The limit test is in the upsert's WHERE: a window already at its limit is left as it is (no row changed).
    this.holdKeyStmt = db.prepare(
      `INSERT INTO key_spend (key_id, window_start, spent) VALUES (@keyId, @windowStart, @amount)
       ON CONFLICT (key_id, window_start) DO UPDATE SET spent = spent + excluded.spent WHERE spent + excluded.spent <= @limit`,
    );
    this.releaseKeyStmt = db.prepare(
      'UPDATE key_spend SET spent = spent - @back WHERE key_id = @keyId AND window_start = @windowStart',
    );
    this.keySpendStmt = db.prepare('SELECT spent FROM key_spend WHERE key_id = ? AND window_start = ?');
    // The cap is tested in the upsert's WHERE, as the key's budget is: a key at its cap changes no row.
    this.holdKeyInFlightStmt = db.prepare(
      `INSERT INTO key_in_flight (key_id, in_flight) VALUES (@keyId, @count)
       ON CONFLICT (key_id) DO UPDATE SET in_flight = in_flight + excluded.in_flight WHERE in_flight + excluded.in_flight <= @cap`,
    );
    this.releaseKeyInFlightStmt = db.prepare('UPDATE key_in_flight SET in_flight = in_flight - 1 WHERE key_id = ?');
    this.addUsageStmt = db.prepare(
      `INSERT INTO usage_daily (user_id, day, model_id, key_id, count, tokens) VALUES (@userId, @day, @modelId, @keyId, 1, @charged)
       ON CONFLICT (user_id, day, model_id, key_id) DO UPDATE SET count = count + 1, tokens = tokens + excluded.tokens`,
    );
    this.addSpanStmt = db.prepare(
      `INSERT INTO usage_spans (user_id, span, start, model_id, key_id, count, tokens) VALUES (@userId, @span, @start, @modelId, @keyId, 1, @charged)
       ON CONFLICT (user_id, span, start, model_id, key_id) DO UPDATE SET count = count + 1, tokens = tokens + excluded.tokens`,
    );
    this.addDayStmt = db.prepare(
      `INSERT INTO usage_days (user_id, day, count, tokens) VALUES (@userId, @day, 1, @charged)
       ON CONFLICT (user_id, day) DO UPDATE SET count = count + 1, tokens = tokens + excluded.tokens`,
    );
    this.usageStmts = {
      day: db.prepare(usageSql('day')),
      model: db.prepare(usageSql('model')),
      key: db.prepare(usageSql('key')),
    };

    this.reserveTx = db
      .transaction((userId: string, generationId: string, amount: number, now: number, options: ReserveOptions): ReserveResult | ReserveOutcome => {
        const existing = this.findReserveStmt.get(generationId) as ReserveRow | undefined;
        if (existing) {
          if (existing.user_id !== userId) {
            // Ids are random, so this is a caller bug; answering 'ok' would let one user ride on another's reserve.
            throw new Error(`Generation ${generationId} is already reserved for another user`);
          }
          // A retry of the same create: the first call already holds the amount.
          return outcome(this.orgs.of(userId), this.users.of(userId));
        }
        // A free generation still needs an account row for the reserve's foreign key.
        if (amount === 0) this.ensureAccountStmt.run(userId);
        if (this.holdStmt.run({ userId, amount }).changes === 0) return 'insufficient';
        const keyId = options.keyId ?? null;
        const limit = keyId !== null ? options.keyLimit : undefined;
        if (limit) {
          const held = amount <= limit.amount && this.holdKeyStmt.run({ keyId, windowStart: limit.windowStart, amount, limit: limit.amount }).changes === 1;
          // Undoes the balance hold above with the whole transaction.
          if (!held) throw new OverBudget();
        }
        const keyCounted = this.holdKeyInFlight(keyId, 1, options.keyMaxInFlight);
        this.insertReserveStmt.run({
          generationId,
          userId,
          amount,
          now,
          modelId: options.modelId ?? null,
          keyId,
          windowStart: limit ? limit.windowStart : null,
          keyCounted,
        });
        const organization = this.orgs.hold(userId, [generationId], amount, options.windows);
        return outcome(organization, this.users.hold(userId, [generationId], amount, options.windows));
      })
      .immediate;

    // One IMMEDIATE transaction for the whole batch: the total is held at once (the balance test in the UPDATE's
    // WHERE), then every reserve row is inserted; a refusal or a failing row rolls all of it back.
    this.reserveManyTx = db
      .transaction((userId: string, items: readonly ReserveItem[], now: number, options: ReserveOptions): ReserveResult | ReserveOutcome => {
        let existing = 0;
        for (const item of items) {
          const row = this.findReserveStmt.get(item.generationId) as ReserveRow | undefined;
          if (!row) continue;
          if (row.user_id !== userId) throw new Error(`Generation ${item.generationId} is already reserved for another user`);
          existing++;
        }
        if (existing > 0) {
          if (existing === items.length) return outcome(this.orgs.of(userId), this.users.of(userId));
          throw new Error('reserveMany: some of these generations are already reserved');
        }
        const total = items.reduce((sum, item) => sum + item.amount, 0);
        if (total === 0) this.ensureAccountStmt.run(userId);
        if (this.holdStmt.run({ userId, amount: total }).changes === 0) return 'insufficient';
        const keyId = options.keyId ?? null;
        const limit = keyId !== null ? options.keyLimit : undefined;
        if (limit) {
          const held = total <= limit.amount && this.holdKeyStmt.run({ keyId, windowStart: limit.windowStart, amount: total, limit: limit.amount }).changes === 1;
          if (!held) throw new OverBudget();
        }
        const keyCounted = this.holdKeyInFlight(keyId, items.length, options.keyMaxInFlight);
        for (const item of items) {
          this.insertReserveStmt.run({
            generationId: item.generationId,
            userId,
            amount: item.amount,
            now,
            modelId: item.modelId ?? null,
            keyId,
            windowStart: limit ? limit.windowStart : null,
            keyCounted,
          });
        }
        const ids = items.map((i) => i.generationId);
        const organization = this.orgs.hold(userId, ids, total, options.windows);
        return outcome(organization, this.users.hold(userId, ids, total, options.windows));
      })
      .immediate;

    this.settleTx = db
      .transaction((generationId: string, amount: number, now: number, counted: boolean): number | null => {
        const reserve = this.findReserveStmt.get(generationId) as ReserveRow | undefined;
        if (!reserve) return null;
        // Settled before (a retry after a crash): report the first charge, change nothing.
        if (reserve.state === 'settled') return reserve.charged ?? 0;
        const charged = Math.min(Math.max(amount, 0), reserve.amount);
        this.closeReserveStmt.run({ generationId, charged, now });
        this.applySettleStmt.run({ userId: reserve.user_id, amount: reserve.amount, charged });
        if (reserve.key_id !== null && reserve.window_start !== null) {
          this.releaseKeyStmt.run({ keyId: reserve.key_id, windowStart: reserve.window_start, back: reserve.amount - charged });
        }
        // A release (a create undone: no generation was made) gives everything back and counts no usage.
        if (counted) {
          const usage = { userId: reserve.user_id, day: usageDayIndex(now), modelId: reserve.model_id ?? '', keyId: reserve.key_id ?? '', charged };
          this.addUsageStmt.run(usage);
          for (const span of USAGE_SPANS) this.addSpanStmt.run({ ...usage, span, start: usage.day - (usage.day % span) });
          this.addDayStmt.run(usage);
        }
        if (reserve.key_in_flight === 1 && reserve.key_id !== null) this.releaseKeyInFlightStmt.run(reserve.key_id);
        this.orgs.settled(reserve, charged, now, counted);
        this.users.settled(reserve, charged);
        return charged;
      })
      .immediate;
  }

  async reserve(
    userId: string,
    generationId: string,
    amount: number,
    now: number = Date.now(),
    options: ReserveOptions = {},
  ): Promise<ReserveResult | ReserveOutcome> {
    assertAmount(amount, 'reserve amount');
    if (options.keyLimit) assertAmount(options.keyLimit.amount, 'key limit');
    try {
      return this.reserveTx(userId, generationId, amount, now, options);
    } catch (err) {
      return refusal(err);
    }
  }

  async reserveMany(userId: string, items: readonly ReserveItem[], now: number = Date.now(), options: ReserveOptions = {}): Promise<ReserveResult | ReserveOutcome> {
    for (const item of items) assertAmount(item.amount, 'reserve amount');
    if (options.keyLimit) assertAmount(options.keyLimit.amount, 'key limit');
    if (items.length === 0) return 'ok';
    try {
      return this.reserveManyTx(userId, items, now, options);
    } catch (err) {
      return refusal(err);
    }
  }

  async createOrganization(organization: OrganizationRecord): Promise<boolean> {
    return this.orgs.create(organization);
  }

  async setOrganizationLimits(organizationId: string, limits: OrganizationLimits): Promise<boolean> {
    return this.orgs.setLimits(organizationId, limits);
  }

  async organization(organizationId: string, windows: BudgetWindows): Promise<OrganizationState | null> {
    return this.orgs.state(organizationId, windows);
  }

  async addMember(organizationId: string, member: OrganizationMember): Promise<'added' | 'no_organization' | 'member_elsewhere'> {
    return this.orgs.addMember(organizationId, member);
  }

  async removeMember(organizationId: string, userId: string): Promise<boolean> {
    return this.orgs.removeMember(organizationId, userId);
  }

  async membership(userId: string): Promise<{ organizationId: string; role: OrganizationRole } | null> {
    return this.orgs.membership(userId);
  }

  async organizationUsage(organizationId: string, query: OrganizationUsageQuery): Promise<UsageReport> {
    return this.orgs.usage(organizationId, query);
  }

  async setUserLimits(userId: string, limits: UserLimits): Promise<void> {
    this.users.set(userId, limits);
  }

  async userLimits(userId: string, windows: BudgetWindows): Promise<UserLimitState | null> {
    return this.users.state(userId, windows);
  }

  /** Inside a reserve's transaction: `count` slots of the key's in-flight cap, or `KeyAtCap` thrown. 1 when counted. */
  private holdKeyInFlight(keyId: string | null, count: number, cap: number | undefined): 0 | 1 {
    if (keyId === null || cap === undefined) return 0;
    if (count > cap || this.holdKeyInFlightStmt.run({ keyId, count, cap }).changes !== 1) throw new KeyAtCap();
    return 1;
  }

  async settle(generationId: string, amount: number, now: number = Date.now()): Promise<number | null> {
    if (!Number.isFinite(amount)) throw new RangeError(`settle amount must be a finite number, got ${amount}`);
    return this.settleTx(generationId, amount, now, true);
  }

  async release(generationId: string, now: number = Date.now()): Promise<number | null> {
    return this.settleTx(generationId, 0, now, false);
  }

  async keySpend(keyId: string, windowStart: number): Promise<number> {
    return (this.keySpendStmt.get(keyId, windowStart) as { spent: number } | undefined)?.spent ?? 0;
  }

  async usage(userId: string, query: UsageQuery): Promise<UsageReport> {
    const [from, to] = [dayIndexOf(query.from), dayIndexOf(query.to)];
    const c = query.groupBy === 'day' ? undefined : usageCover(from, to);
    const params = c ? [...c.days[0], ...c.days[1], userId, ...c.span8[0], ...c.span8[1], userId, ...c.span64] : [from, to];
    const rows = this.usageStmts[query.groupBy].all(userId, ...params) as Array<{
      g: string | number;
      count: number;
      tokens: number;
    }>;
    return groupUsage(
      rows.map((r) => ({
        group: query.groupBy === 'day' ? usageDayOfIndex(Number(r.g)) : r.g === '' ? null : String(r.g),
        count: r.count,
        tokens: r.tokens,
      })),
      query.groupBy,
    );
  }

  async balance(userId: string): Promise<number> {
    return (await this.account(userId)).balance;
  }

  async credit(userId: string, amount: number): Promise<void> {
    assertTokenAmount(amount, 'credit amount');
    if (this.creditStmt.run({ userId, amount, max: MAX_TOKENS }).changes === 0) {
      throw new RangeError(`credit amount ${amount} would take the balance of "${userId}" past ${MAX_TOKENS} tokens`);
    }
  }

  async openAccount(userId: string, balance: number): Promise<boolean> {
    assertTokenAmount(balance, 'balance');
    return this.openAccountStmt.run(userId, balance).changes === 1;
  }

  async account(userId: string): Promise<AccountSnapshot> {
    const row = this.accountStmt.get(userId) as AccountSnapshot | undefined;
    return row ? { balance: row.balance, reserved: row.reserved, settled: row.settled } : { balance: 0, reserved: 0, settled: 0 };
  }

  async listAccounts(limit: number, after?: string): Promise<AccountRow[]> {
    if (!(limit > 0)) return [];
    return (this.listAccountsStmt.all(after ?? '', Math.floor(limit)) as AccountRow[]).map((r) => ({ userId: r.userId, balance: r.balance, reserved: r.reserved, settled: r.settled }));
  }

  async openReserves(limit: number, after?: OpenReserveCursor): Promise<OpenReserve[]> {
    if (!(limit > 0)) return [];
    const rows = (
      after === undefined ? this.openReservesStmt.all(Math.floor(limit)) : this.openReservesAfterStmt.all(after.createdAt, after.generationId, Math.floor(limit))
    ) as Array<{
      generation_id: string;
      user_id: string;
      amount: number;
      created_at: number;
    }>;
    return rows.map((r) => ({ generationId: r.generation_id, userId: r.user_id, amount: r.amount, createdAt: r.created_at }));
  }
}

/** A reserve's answer: plain `ok` for a user of no organisation and no limits, or the outcome naming them. */
function outcome(organization: OrganizationRecord | undefined, userLimits: UserLimits | undefined): ReserveResult | ReserveOutcome {
  if (!organization && !userLimits) return 'ok';
  return { result: 'ok', ...(organization ? { organization } : {}), ...(userLimits ? { userLimits } : {}) };
}

/** A rolled-back reserve's answer (the signals of its transaction), or the error again. */
function refusal(err: unknown): ReserveResult | ReserveOutcome {
  if (err instanceof OverBudget) return 'budget_exceeded';
  if (err instanceof KeyAtCap) return 'limit_reached';
  if (err instanceof OrganizationRefused) return { result: err.result, refusedBy: 'organization', organization: err.organization };
  if (err instanceof UserRefused) return { result: err.result, refusedBy: 'user', userLimits: err.limits };
  throw err;
}

function assertAmount(amount: number, what: string): void {
  if (!Number.isFinite(amount) || amount < 0) {
    throw new RangeError(`${what} must be a finite number >= 0, got ${amount}`);
  }
}
