import type {
  AccountRow,
  AccountSnapshot,
  BudgetWindows,
  Ledger,
  OpenReserve,
  OrganizationLedger,
  OrganizationMember,
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
import { MAX_TOKENS, assertTokenAmount, dayIndexOf, groupUsage, usageDayIndex, usageDayOfIndex } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, type Queryable, assertAmount, decodeKey, encodeKey, num } from './db.js';
import { OrganizationRefused, PostgresOrganizations, holdOnOrganization, organizationSql, settleOrganizationCtes } from './organizations.js';
import { PostgresUserLimits, UserRefused, holdOnUser, settleUserCtes } from './user-limits.js';

/** The ledger's statements, given the quoted schema (exported for the index tests). */
export function ledgerSql(s: string): Record<
  | 'insertReserve'
  | 'insertReserves'
  | 'reserveOwners'
  | 'reserveOwner'
  | 'debit'
  | 'ensureAccount'
  | 'holdKey'
  | 'holdKeyInFlight'
  | 'settle'
  | 'charged'
  | 'account'
  | 'credit'
  | 'openAccount'
  | 'openReserves'
  | 'listAccounts'
  | 'keySpend'
  | 'usageByDay'
  | 'usageByModel'
  | 'usageByKey',
  string
> {
  return {
    // The reserve row goes in first: its primary key is what makes a retried reserve idempotent. A concurrent
    // duplicate blocks on this insert until the first transaction ends, then sees its row (or, if the first
    // rolled back as insufficient, inserts its own).
    // The owner's organisation is read in the same statement (no round trip of its own) and kept on the row.
    // So is whether the owner has limits of its own (a row never deleted): only then does the reserve hold them.
    insertReserve: `INSERT INTO ${s}.reserves (generation_id, user_id, amount, created_at, model_id, key_id, window_start, key_in_flight, organization_id, user_limited)
      SELECT $1, $2, $3, $4, $5, $6, $7, $8, (SELECT organization_id FROM ${s}.organization_members WHERE user_id = $2),
        EXISTS (SELECT 1 FROM ${s}.user_limits WHERE user_id = $2)
      ON CONFLICT (generation_id) DO NOTHING RETURNING organization_id, user_limited`,
    reserveOwner: `SELECT user_id FROM ${s}.reserves WHERE generation_id = $1`,
    // A batch's reserves in one statement; the rows' primary keys make a retried batch hold nothing more.
    insertReserves: `INSERT INTO ${s}.reserves (generation_id, user_id, amount, created_at, model_id, key_id, window_start, key_in_flight, organization_id, user_limited)
      SELECT u.g, $2, u.a, $3, u.m, $4, $5, $8, (SELECT organization_id FROM ${s}.organization_members WHERE user_id = $2),
        EXISTS (SELECT 1 FROM ${s}.user_limits WHERE user_id = $2)
      FROM unnest($1::text[], $6::numeric[], $7::text[]) AS u(g, a, m)
      ON CONFLICT (generation_id) DO NOTHING RETURNING organization_id, user_limited`,
    reserveOwners: `SELECT DISTINCT user_id FROM ${s}.reserves WHERE generation_id = ANY($1::text[])`,
    // The row lock serialises racing debits, and READ COMMITTED re-checks `balance >= $2` against the latest
    // committed balance, so the balance never goes below zero.
    debit: `UPDATE ${s}.accounts SET balance = balance - $2, reserved = reserved + $2
      WHERE user_id = $1 AND balance >= $2`,
    ensureAccount: `INSERT INTO ${s}.accounts (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`,
    // ON CONFLICT DO UPDATE locks the window's row and tests the WHERE against its latest committed spend, so racing
    // holds are serialised on that row and never pass the limit. Taken after the account row, as settle does.
    holdKey: `INSERT INTO ${s}.key_spend (key_id, window_start, spent) VALUES ($1, $2, $3)
      ON CONFLICT (key_id, window_start) DO UPDATE SET spent = ${s}.key_spend.spent + EXCLUDED.spent
      WHERE ${s}.key_spend.spent + EXCLUDED.spent <= $4::numeric`,
    // The key's in-flight cap, held as its budget is (the row locked by the upsert, the cap tested in its WHERE),
    // after key_spend and before the organisation.
    holdKeyInFlight: `INSERT INTO ${s}.key_in_flight (key_id, in_flight) VALUES ($1, $2)
      ON CONFLICT (key_id) DO UPDATE SET in_flight = ${s}.key_in_flight.in_flight + EXCLUDED.in_flight
      WHERE ${s}.key_in_flight.in_flight + EXCLUDED.in_flight <= $3`,
    // One statement: the reserve closes and the account moves together or not at all. A second settle finds
    // no open reserve (after waiting on the first one's row lock) and changes nothing.
    settle: `WITH r AS (
        UPDATE ${s}.reserves SET state = 'settled', charged = LEAST(amount, $2::numeric), settled_at = $3
        WHERE generation_id = $1 AND state = 'open'
        RETURNING user_id, amount, charged, model_id, key_id, window_start, organization_id, organization_window, key_in_flight, user_limited, user_window
      ), a AS (
        UPDATE ${s}.accounts acc
        SET reserved = acc.reserved - r.amount, settled = acc.settled + r.charged,
            balance = acc.balance + (r.amount - r.charged)
        FROM r WHERE acc.user_id = r.user_id
        RETURNING 1
      ), k AS (
        UPDATE ${s}.key_spend ks SET spent = ks.spent - (r.amount - r.charged)
        FROM r WHERE ks.key_id = r.key_id AND ks.window_start = r.window_start
        RETURNING 1
      ), u AS (
        INSERT INTO ${s}.usage_daily (user_id, day, model_id, key_id, count, tokens)
        SELECT r.user_id, $4::integer, coalesce(r.model_id, ''), coalesce(r.key_id, ''), 1, r.charged FROM r
        ON CONFLICT (user_id, day, model_id, key_id)
        DO UPDATE SET count = ${s}.usage_daily.count + 1, tokens = ${s}.usage_daily.tokens + EXCLUDED.tokens
        RETURNING 1
      )${settleOrganizationCtes(s)}${settleUserCtes(s)}
      SELECT r.charged, (SELECT count(*) FROM a)::int AS accounts FROM r`,
    charged: `SELECT charged FROM ${s}.reserves WHERE generation_id = $1`,
    account: `SELECT balance, reserved, settled FROM ${s}.accounts WHERE user_id = $1`,
    // The primary key's index, in the database's own order of the stored (encoded) ids.
    listAccounts: `SELECT user_id, balance, reserved, settled FROM ${s}.accounts WHERE user_id > $1 ORDER BY user_id LIMIT $2`,
    // The bound is tested in the upsert's WHERE (on the locked row): a credit that would take balance plus reserved
    // past it changes no row.
    credit: `INSERT INTO ${s}.accounts (user_id, balance) VALUES ($1, $2)
      ON CONFLICT (user_id) DO UPDATE SET balance = ${s}.accounts.balance + EXCLUDED.balance
      WHERE ${s}.accounts.balance + ${s}.accounts.reserved + EXCLUDED.balance <= $3`,
    openAccount: `INSERT INTO ${s}.accounts (user_id, balance) VALUES ($1, $2) ON CONFLICT (user_id) DO NOTHING`,
    openReserves: `SELECT generation_id, user_id, amount, created_at FROM ${s}.reserves
      WHERE state = 'open' ORDER BY created_at, generation_id LIMIT $1`,
    keySpend: `SELECT spent FROM ${s}.key_spend WHERE key_id = $1 AND window_start = $2`,
    usageByDay: usageSql(s, 'day'),
    usageByModel: usageSql(s, 'model_id'),
    usageByKey: usageSql(s, 'key_id'),
  };
}

function usageSql(s: string, column: string): string {
  return `SELECT ${column} AS g, sum(count)::bigint AS count, sum(tokens) AS tokens FROM ${s}.usage_daily
    WHERE user_id = $1 AND day BETWEEN $2 AND $3 GROUP BY ${column}`;
}

/**
 * Ledger on PostgreSQL. Accounts hold `balance` (spendable), `reserved` (held by open reserves) and `settled`
 * (charged, all time); one row per reserve records what it held and, once settled, what it charged. Every
 * movement shifts tokens between those three columns in the same transaction as the reserve row changes, so
 * `balance + reserved + settled` only changes through `credit`.
 */
export class PostgresLedger implements Ledger, OrganizationLedger, UserLimitLedger {
  private readonly db: PgDatabase;
  private readonly sql: ReturnType<typeof ledgerSql>;
  private readonly orgSql: ReturnType<typeof organizationSql>;
  private readonly orgs: PostgresOrganizations;
  private readonly users: PostgresUserLimits;

  constructor(pool: Pool, options: { schema?: string } = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice');
    this.sql = ledgerSql(this.db.s);
    this.orgSql = organizationSql(this.db.s);
    this.orgs = new PostgresOrganizations(this.db);
    this.users = new PostgresUserLimits(this.db);
  }

  setUserLimits(userId: string, limits: UserLimits): Promise<void> {
    return this.users.set(userId, limits);
  }

  userLimits(userId: string, windows: BudgetWindows): Promise<UserLimitState | null> {
    return this.users.state(userId, windows);
  }

  createOrganization(organization: OrganizationRecord): Promise<boolean> {
    return this.orgs.create(organization);
  }

  organization(organizationId: string, windows: BudgetWindows): Promise<OrganizationState | null> {
    return this.orgs.state(organizationId, windows);
  }

  addMember(organizationId: string, member: OrganizationMember): Promise<'added' | 'no_organization' | 'member_elsewhere'> {
    return this.orgs.addMember(organizationId, member);
  }

  removeMember(organizationId: string, userId: string): Promise<boolean> {
    return this.orgs.removeMember(organizationId, userId);
  }

  membership(userId: string): Promise<{ organizationId: string; role: OrganizationRole } | null> {
    return this.orgs.membership(userId);
  }

  organizationUsage(organizationId: string, query: OrganizationUsageQuery): Promise<UsageReport> {
    return this.orgs.usage(organizationId, query);
  }

  async reserve(
    userId: string,
    generationId: string,
    amount: number,
    now: number = Date.now(),
    options: ReserveOptions = {},
  ): Promise<ReserveResult | ReserveOutcome> {
    assertAmount(amount, 'amount');
    const user = encodeKey(userId);
    const gen = encodeKey(generationId);
    const keyId = options.keyId !== undefined ? encodeKey(options.keyId) : null;
    const limit = keyId !== null ? options.keyLimit : undefined;
    if (limit) assertAmount(limit.amount, 'key limit');
    const modelId = options.modelId !== undefined ? encodeKey(options.modelId) : null;
    const keyCap = keyId !== null ? options.keyMaxInFlight : undefined;
    try {
      return await this.db.transaction<ReserveResult | ReserveOutcome>(async (tx) => {
        const inserted = await tx.query<{ organization_id: string | null; user_limited: boolean }>(this.sql.insertReserve, [
          gen,
          user,
          amount,
          Math.trunc(now),
          modelId,
          keyId,
          limit ? Math.trunc(limit.windowStart) : null,
          keyCap !== undefined,
        ]);
        if (inserted.rowCount === 0) {
          // Already reserved (by an earlier call or a concurrent one that committed): hold nothing more.
          const { rows } = await tx.query<{ user_id: string }>(this.sql.reserveOwner, [gen]);
          if (rows[0] && rows[0].user_id !== user) {
            // Ids are random, so this is a caller bug; 'ok' would let one user ride on another's reserve.
            throw new Error(`Generation ${generationId} is already reserved for another user`);
          }
          return 'ok';
        }
        // A free generation needs no funds, but its settle still moves (zero) tokens through the account row.
        if (amount === 0) await tx.query(this.sql.ensureAccount, [user]);
        const debited = await tx.query(this.sql.debit, [user, amount]);
        // Roll the reserve row back with the transaction, so a later retry with more funds can reserve.
        if (debited.rowCount !== 1) throw new Insufficient();
        if (limit) {
          if (amount > limit.amount) throw new OverBudget();
          const held = await tx.query(this.sql.holdKey, [keyId, Math.trunc(limit.windowStart), amount, limit.amount]);
          // Rolls back the debit and the reserve row with it.
          if (held.rowCount !== 1) throw new OverBudget();
        }
        if (keyCap !== undefined) await this.holdKeyInFlight(tx, keyId!, 1, keyCap);
        const org = inserted.rows[0]?.organization_id ?? null;
        const organization = org === null ? undefined : await holdOnOrganization(tx, this.orgSql, org, [gen], amount, options.windows);
        const limited = inserted.rows[0]?.user_limited === true;
        return outcome(organization, limited ? await holdOnUser(tx, this.users.sql, user, [gen], amount, options.windows) : undefined);
      });
    } catch (err) {
      return refusal(err);
    }
  }

  async reserveMany(userId: string, items: readonly ReserveItem[], now: number = Date.now(), options: ReserveOptions = {}): Promise<ReserveResult | ReserveOutcome> {
    for (const item of items) assertAmount(item.amount, 'amount');
    if (items.length === 0) return 'ok';
    const user = encodeKey(userId);
    const keyId = options.keyId !== undefined ? encodeKey(options.keyId) : null;
    const limit = keyId !== null ? options.keyLimit : undefined;
    if (limit) assertAmount(limit.amount, 'key limit');
    const ids = items.map((i) => encodeKey(i.generationId));
    const total = items.reduce((sum, i) => sum + i.amount, 0);
    const keyCap = keyId !== null ? options.keyMaxInFlight : undefined;
    try {
      return await this.db.transaction<ReserveResult | ReserveOutcome>(async (tx) => {
        const inserted = await tx.query<{ organization_id: string | null; user_limited: boolean }>(this.sql.insertReserves, [
          ids,
          user,
          Math.trunc(now),
          keyId,
          limit ? Math.trunc(limit.windowStart) : null,
          items.map((i) => i.amount),
          items.map((i) => (i.modelId !== undefined ? encodeKey(i.modelId) : null)),
          keyCap !== undefined,
        ]);
        if (inserted.rowCount !== items.length) {
          const { rows } = await tx.query<{ user_id: string }>(this.sql.reserveOwners, [ids]);
          if (rows.some((r) => r.user_id !== user)) throw new Error('Some of these generations are already reserved for another user');
          // A retry of the same batch holds nothing more; a batch that overlaps another is a caller bug.
          if (inserted.rowCount === 0) return 'ok';
          throw new Error('reserveMany: some of these generations are already reserved');
        }
        if (total === 0) await tx.query(this.sql.ensureAccount, [user]);
        const debited = await tx.query(this.sql.debit, [user, total]);
        if (debited.rowCount !== 1) throw new Insufficient();
        if (limit) {
          if (total > limit.amount) throw new OverBudget();
          const held = await tx.query(this.sql.holdKey, [keyId, Math.trunc(limit.windowStart), total, limit.amount]);
          if (held.rowCount !== 1) throw new OverBudget();
        }
        if (keyCap !== undefined) await this.holdKeyInFlight(tx, keyId!, items.length, keyCap);
        const org = inserted.rows[0]?.organization_id ?? null;
        const organization = org === null ? undefined : await holdOnOrganization(tx, this.orgSql, org, ids, total, options.windows);
        const limited = inserted.rows[0]?.user_limited === true;
        return outcome(organization, limited ? await holdOnUser(tx, this.users.sql, user, ids, total, options.windows) : undefined);
      });
    } catch (err) {
      return refusal(err);
    }
  }

  /** Inside a reserve's transaction: `count` slots of the key's in-flight cap, or `KeyAtCap` thrown (rolling it back). */
  private async holdKeyInFlight(tx: Queryable, keyId: string, count: number, cap: number): Promise<void> {
    if (count > cap || (await tx.query(this.sql.holdKeyInFlight, [keyId, count, cap])).rowCount !== 1) throw new KeyAtCap();
  }

  async keySpend(keyId: string, windowStart: number): Promise<number> {
    const { rows } = await this.db.query<{ spent: string }>(this.sql.keySpend, [encodeKey(keyId), Math.trunc(windowStart)]);
    return rows[0] ? num(rows[0].spent) : 0;
  }

  async usage(userId: string, query: UsageQuery): Promise<UsageReport> {
    const sql = query.groupBy === 'day' ? this.sql.usageByDay : query.groupBy === 'model' ? this.sql.usageByModel : this.sql.usageByKey;
    const { rows } = await this.db.query<{ g: string | number; count: string; tokens: string }>(sql, [
      encodeKey(userId),
      dayIndexOf(query.from),
      dayIndexOf(query.to),
    ]);
    return groupUsage(
      rows.map((r) => ({
        group: query.groupBy === 'day' ? usageDayOfIndex(num(r.g)) : r.g === '' ? null : decodeKey(String(r.g)),
        count: num(r.count),
        tokens: num(r.tokens),
      })),
      query.groupBy,
    );
  }

  async settle(generationId: string, amount: number, now: number = Date.now()): Promise<number | null> {
    if (typeof amount !== 'number' || !Number.isFinite(amount)) {
      throw new RangeError(`settle amount must be a finite number, got ${String(amount)}`);
    }
    // Clamped to [0, reserve]: below zero would credit the user, above the reserve would break the invariant.
    const charge = Math.max(0, amount);
    const { rows } = await this.db.query<{ charged: string }>(this.sql.settle, [
      encodeKey(generationId),
      charge,
      Math.trunc(now),
      usageDayIndex(now),
    ]);
    if (rows[0]) return num(rows[0].charged);
    const prior = await this.db.query<{ charged: string | null }>(this.sql.charged, [encodeKey(generationId)]);
    const row = prior.rows[0];
    if (!row) return null;
    // Still open here means a concurrent settle is mid-flight; its charge is not known yet, so report ours.
    return row.charged === null ? charge : num(row.charged);
  }

  async release(generationId: string, now?: number): Promise<number | null> {
    return this.settle(generationId, 0, now);
  }

  async balance(userId: string): Promise<number> {
    return (await this.account(userId)).balance;
  }

  async credit(userId: string, amount: number): Promise<void> {
    assertTokenAmount(amount, 'credit amount');
    const { rowCount } = await this.db.query(this.sql.credit, [encodeKey(userId), amount, MAX_TOKENS]);
    if (rowCount === 0) throw new RangeError(`credit amount ${amount} would take the balance of "${userId}" past ${MAX_TOKENS} tokens`);
  }

  async openAccount(userId: string, balance: number): Promise<boolean> {
    assertTokenAmount(balance, 'balance');
    const { rowCount } = await this.db.query(this.sql.openAccount, [encodeKey(userId), balance]);
    return rowCount === 1;
  }

  async account(userId: string): Promise<AccountSnapshot> {
    const { rows } = await this.db.query(this.sql.account, [encodeKey(userId)]);
    const row = rows[0];
    if (!row) return { balance: 0, reserved: 0, settled: 0 };
    return { balance: num(row.balance), reserved: num(row.reserved), settled: num(row.settled) };
  }

  async listAccounts(limit: number, after?: string): Promise<AccountRow[]> {
    if (!(limit > 0)) return [];
    const { rows } = await this.db.query(this.sql.listAccounts, [after === undefined ? '' : encodeKey(after), Math.floor(limit)]);
    return rows.map((r) => ({ userId: decodeKey(String(r.user_id)), balance: num(r.balance), reserved: num(r.reserved), settled: num(r.settled) }));
  }

  async openReserves(limit: number): Promise<OpenReserve[]> {
    const { rows } = await this.db.query(this.sql.openReserves, [limit]);
    return rows.map((r) => ({
      generationId: decodeKey(String(r.generation_id)),
      userId: decodeKey(String(r.user_id)),
      amount: num(r.amount),
      createdAt: num(r.created_at),
    }));
  }
}

/** A rolled-back reserve's answer (the signals below), or the error again. */
function refusal(err: unknown): ReserveResult | ReserveOutcome {
  if (err instanceof Insufficient) return 'insufficient';
  if (err instanceof OverBudget) return 'budget_exceeded';
  if (err instanceof KeyAtCap) return 'limit_reached';
  if (err instanceof OrganizationRefused) return { result: err.result, refusedBy: 'organization', organization: err.organization };
  if (err instanceof UserRefused) return { result: err.result, refusedBy: 'user', userLimits: err.limits };
  throw err;
}

/** A held reserve's answer: plain `ok` for a user of no organisation and no limits, or the outcome naming them. */
function outcome(organization: OrganizationRecord | undefined, userLimits: UserLimits | undefined): ReserveResult | ReserveOutcome {
  if (!organization && !userLimits) return 'ok';
  return { result: 'ok', ...(organization ? { organization } : {}), ...(userLimits ? { userLimits } : {}) };
}

/** Internal signal to roll back a reserve whose key is at its in-flight cap. */
class KeyAtCap extends Error {
  override readonly name = 'KeyAtCap' as const;
}

/** Internal signal to roll back a reserve whose key window is at its limit. */
class OverBudget extends Error {
  override readonly name = 'OverBudget' as const;
}

/** Internal signal to roll back a reserve whose debit found too little balance. */
class Insufficient extends Error {
  override readonly name = 'Insufficient' as const;
}
