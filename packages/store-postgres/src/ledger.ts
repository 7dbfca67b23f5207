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
import { MAX_TOKENS, assertTokenAmount, dayIndexOf, groupUsage, usageCover, usageDayIndex, usageDayOfIndex } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, assertAmount, decodeKey, encodeKey, num, type Queryable, type PgStatementOptions } from './db.js';
import { OrganizationRefused, PostgresOrganizations, holdOnOrganization, organizationSql, settleOrganizationCtes } from './organizations.js';
import { PostgresUserLimits, UserRefused, holdOnUser, settleUserCtes } from './user-limits.js';

/** The ledger's statements, given the quoted schema (exported for the index tests). */
export function ledgerSql(s: string): Record<
  | 'insertReserve'
  | 'insertReserves'
  | 'reserveOwners'
  | 'reserveOwner'
  | 'debit'
  | 'reserveOne'
  | 'refusal'
  | 'ensureAccount'
  | 'holdKey'
  | 'holdKeyInFlight'
  | 'settle'
  | 'release'
  | 'charged'
  | 'account'
  | 'credit'
  | 'openAccount'
  | 'openReserves'
  | 'openReservesAfter'
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
    // committed balance, so the balance never goes below zero. The same holds for the in-flight count (issue 36): the
    // user's open reserves, kept on the row ($3 of them added; $4 the cap, null for none), so no reserve counts rows.
    debit: `UPDATE ${s}.accounts SET balance = balance - $2, reserved = reserved + $2, in_flight = in_flight + $3
      WHERE user_id = $1 AND balance >= $2 AND ($4::bigint IS NULL OR in_flight < $4::bigint)`,
    // A reserve with no key limit, in one statement (one round trip, issue 36): the debit (balance and in-flight cap,
    // as \`debit\`), then the reserve row from it. No debit, no row. A retried reserve's row already exists: the
    // INSERT's unique violation fails the whole statement, the debit with it, and the caller sees the owner.
    reserveOne: `WITH ${reserveSteps(s, { id: '$1', user: '$2', amount: '$3', now: '$4', model: '$5', cap: '$6', key: '$7' })}
      SELECT count(*)::int AS n FROM r`,
    // Why a debit changed no row: the reserve already there (its owner), a limit beyond the balance and the user's cap
    // (the owner's organisation, or its own limits: the full reserve applies), the balance, the in-flight count.
    refusal: `SELECT (SELECT user_id FROM ${s}.reserves WHERE generation_id = $1) AS owner,
        EXISTS (SELECT 1 FROM ${s}.organization_members WHERE user_id = $2) OR EXISTS (SELECT 1 FROM ${s}.user_limits WHERE user_id = $2) AS limited,
        (SELECT balance FROM ${s}.accounts WHERE user_id = $2) AS balance,
        (SELECT in_flight FROM ${s}.accounts WHERE user_id = $2) AS in_flight`,
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
    settle: `WITH ${settleSteps(s, { id: '$1', amount: '$2', now: '$3', day: '$4' })}
      SELECT r.charged, (SELECT count(*) FROM a)::int AS accounts FROM r`,
    // A release (a create undone: no generation was made): the settle of 0, counting no usage.
    release: `WITH ${settleSteps(s, { id: '$1', amount: '$2', now: '$3', day: '$4', counted: 'false' })}
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
    // The next page: a row value the partial index (created_at, generation_id) WHERE state = 'open' seeks to.
    openReservesAfter: `SELECT generation_id, user_id, amount, created_at FROM ${s}.reserves
      WHERE state = 'open' AND (created_at, generation_id) > ($2, $3) ORDER BY created_at, generation_id LIMIT $1`,
    keySpend: `SELECT spent FROM ${s}.key_spend WHERE key_id = $1 AND window_start = $2`,
    usageByDay: usageSql(s, 'day'),
    usageByModel: usageSql(s, 'model_id'),
    usageByKey: usageSql(s, 'key_id'),
  };
}

/**
 * A reserve with no limit beyond the balance and the user's in-flight cap (no key budget or key cap; the owner in no
 * organisation and without limits of its own: its debit changes no row otherwise, and the refusal read sends the caller to the full reserve), as WITH items (`d`: the debit and the in-flight count on the account row, `r`: the
 * reserve row, from it), given the SQL of its values. Written once: the ledger's `reserveOne` runs them, and so does
 * the store's insert that reserves in its own statement (issue 36).
 */
export function reserveSteps(s: string, p: { id: string; user: string; amount: string; now: string; model: string; cap: string; key: string }): string {
  return `d AS (
        UPDATE ${s}.accounts SET balance = balance - ${p.amount}::numeric, reserved = reserved + ${p.amount}::numeric, in_flight = in_flight + 1
        WHERE user_id = ${p.user} AND balance >= ${p.amount}::numeric AND (${p.cap}::bigint IS NULL OR in_flight < ${p.cap}::bigint)
          AND NOT EXISTS (SELECT 1 FROM ${s}.organization_members WHERE user_id = ${p.user})
          AND NOT EXISTS (SELECT 1 FROM ${s}.user_limits WHERE user_id = ${p.user})
        RETURNING user_id
      ), r AS (
        INSERT INTO ${s}.reserves (generation_id, user_id, amount, created_at, model_id, key_id)
        SELECT ${p.id}, user_id, ${p.amount}::numeric, ${p.now}, ${p.model}, ${p.key} FROM d
        RETURNING generation_id
      )`;
}

/**
 * The settle's steps, as WITH items (`r`: the reserve closed, `a`: the account, `k`: the key's window, `u` and `sp`:
 * the usage rollups, then the key's in-flight count, the organisation and its usage: `settleOrganizationCtes`, and
 * the user's own limits: `settleUserCtes`), given the SQL of its generation id, amount, time and UTC day. Written once: the ledger's own
 * `settle` runs them, and so does the store's finishing change when it settles in its own step (issue 36).
 */
export function settleSteps(s: string, p: { id: string; amount: string; now: string; day: string; counted?: 'true' | 'false' }): string {
  const counted = p.counted ?? 'true';
  return `r AS (
        UPDATE ${s}.reserves SET state = 'settled', charged = LEAST(amount, ${p.amount}::numeric), settled_at = ${p.now}
        WHERE generation_id = ${p.id} AND state = 'open'
        RETURNING user_id, amount, charged, model_id, key_id, window_start, organization_id, organization_window, key_in_flight, user_limited, user_window
      ), a AS (
        UPDATE ${s}.accounts acc
        SET reserved = acc.reserved - r.amount, settled = acc.settled + r.charged,
            balance = acc.balance + (r.amount - r.charged), in_flight = GREATEST(acc.in_flight - 1, 0)
        FROM r WHERE acc.user_id = r.user_id
        RETURNING 1
      ), k AS (
        UPDATE ${s}.key_spend ks SET spent = ks.spent - (r.amount - r.charged)
        FROM r WHERE ks.key_id = r.key_id AND ks.window_start = r.window_start
        RETURNING 1
      ), u AS (
        INSERT INTO ${s}.usage_daily (user_id, day, model_id, key_id, count, tokens)
        SELECT r.user_id, ${p.day}::integer, coalesce(r.model_id, ''), coalesce(r.key_id, ''), 1, r.charged FROM r WHERE ${counted}
        ON CONFLICT (user_id, day, model_id, key_id)
        DO UPDATE SET count = ${s}.usage_daily.count + 1, tokens = ${s}.usage_daily.tokens + EXCLUDED.tokens
        RETURNING 1
      ), sp AS (
        INSERT INTO ${s}.usage_spans (user_id, span, start, model_id, key_id, count, tokens)
        SELECT r.user_id, l.span, ${p.day}::integer - ${p.day}::integer % l.span, coalesce(r.model_id, ''), coalesce(r.key_id, ''), 1, r.charged
          FROM r, (VALUES (8), (64)) AS l(span) WHERE ${counted}
        ON CONFLICT (user_id, span, start, model_id, key_id)
        DO UPDATE SET count = ${s}.usage_spans.count + 1, tokens = ${s}.usage_spans.tokens + EXCLUDED.tokens
        RETURNING 1
      )${settleOrganizationCtes(s, p.day, counted)}${settleUserCtes(s)}`;
}

function usageSql(s: string, column: string): string {
  if (column === 'day') {
    return `SELECT day AS g, sum(count)::bigint AS count, sum(tokens) AS tokens FROM ${s}.usage_daily
    WHERE user_id = $1 AND day BETWEEN $2 AND $3 GROUP BY day`;
  }
  // By model or key: the days at the ends ($2..$5), whole 8-day spans ($6..$9) and 64-day spans ($10, $11), as
  // core's usageCover splits the range (an empty part is 1..0).
  return `SELECT g, sum(count)::bigint AS count, sum(tokens) AS tokens FROM (
      SELECT ${column} AS g, count, tokens FROM ${s}.usage_daily
        WHERE user_id = $1 AND (day BETWEEN $2 AND $3 OR day BETWEEN $4 AND $5)
      UNION ALL
      SELECT ${column}, count, tokens FROM ${s}.usage_spans
        WHERE user_id = $1 AND span = 8 AND (start BETWEEN $6 AND $7 OR start BETWEEN $8 AND $9)
      UNION ALL
      SELECT ${column}, count, tokens FROM ${s}.usage_spans
        WHERE user_id = $1 AND span = 64 AND start BETWEEN $10 AND $11
    ) u GROUP BY g`;
}

/**
 * Ledger on PostgreSQL. Accounts hold `balance` (spendable), `reserved` (held by open reserves) and `settled`
 * (charged, all time); one row per reserve records what it held and, once settled, what it charged. Every
 * movement shifts tokens between those three columns in the same transaction as the reserve row changes, so
 * `balance + reserved + settled` only changes through `credit`.
 */
export class PostgresLedger implements Ledger, OrganizationLedger, UserLimitLedger {
  /** `reserve` keeps the in-flight count on the account row (`accounts.in_flight`, migration 11). */
  readonly holdsInFlight = true;
  private readonly db: PgDatabase;
  private readonly sql: ReturnType<typeof ledgerSql>;
  private readonly orgSql: ReturnType<typeof organizationSql>;
  private readonly orgs: PostgresOrganizations;
  private readonly users: PostgresUserLimits;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
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

  setOrganizationLimits(organizationId: string, limits: OrganizationLimits): Promise<boolean> {
    return this.orgs.setLimits(organizationId, limits);
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
    const cap = options.maxInFlight ?? null;
    // A free generation needs no funds, but its settle still moves (zero) tokens through the account row.
    if (amount === 0) await this.ensureAccount(user);
    if (!limit && keyCap === undefined) {
      // One statement when no limit beyond the balance and the user's cap applies; an owner in an organisation or
      // with limits of its own takes the full reserve below.
      const one = await this.reserveOne(generationId, [gen, user, amount, Math.trunc(now), modelId, cap, keyId]);
      if (one !== 'limited') return one;
    }
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
        const debited = await tx.query(this.sql.debit, [user, amount, 1, cap]);
        // Roll the reserve row back with the transaction, so a later retry with more funds can reserve.
        if (debited.rowCount !== 1) throw (await this.refusalOf(tx, null, user, amount)) === 'in_flight_limit' ? new InFlightLimit() : new Insufficient();
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

  /** @internal The account row a free reserve moves (zero) tokens through; `user` encoded. */
  async ensureAccount(user: string): Promise<void> {
    await this.db.query(this.sql.ensureAccount, [user]);
  }

  /**
   * A reserve without a key limit or cap: one statement (`reserveOne`); the refusal read only when it holds nothing.
   * `limited`: the owner has limits beyond its balance and cap (an organisation, its own limits), nothing held: the
   * caller takes the full reserve.
   */
  private async reserveOne(
    generationId: string,
    params: [string, string, number, number, string | null, number | null, string | null],
  ): Promise<ReserveResult | 'limited'> {
    const [gen, user, amount] = params;
    try {
      const { rows } = await this.db.query<{ n: number }>(this.sql.reserveOne, params);
      if (rows[0]!.n === 1) return 'ok';
    } catch (err) {
      // 23505: the reserve row exists (an earlier or concurrent reserve of this generation); nothing was held now.
      if ((err as { code?: string }).code !== '23505') throw err;
    }
    const why = await this.refusalOf(this.db, gen, user, amount);
    if (why === 'reserved_by_other') throw new Error(`Generation ${generationId} is already reserved for another user`);
    return why === 'reserved' ? 'ok' : why;
  }

  /**
   * Why a reserve held nothing (read after it, so racing changes may show; each answer is one the race allows). `gen`
   * null: the caller's own reserve row is in its transaction, so only the balance and count are asked. `limited`
   * (asked after a one-statement reserve): the owner has limits that reserve does not hold (its organisation's, its own).
   */
  /** @internal For the store's insert that reserves in its own statement. */
  async refusalOf(
    q: Queryable,
    gen: string | null,
    user: string,
    amount: number,
    askLimited = gen !== null,
  ): Promise<'reserved' | 'reserved_by_other' | 'limited' | 'insufficient' | 'in_flight_limit'> {
    const { rows } = await q.query<{ owner: string | null; limited: boolean; balance: string | null }>(this.sql.refusal, [gen, user]);
    const row = rows[0]!;
    if (row.owner !== null) return row.owner === user ? 'reserved' : 'reserved_by_other';
    if (askLimited && row.limited) return 'limited';
    return row.balance !== null && num(row.balance) >= amount ? 'in_flight_limit' : 'insufficient';
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
        // A batch counts in flight like single creates, and is never refused by the user's cap (it was admitted as a whole).
        const debited = await tx.query(this.sql.debit, [user, total, items.length, null]);
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
    const [from, to] = [dayIndexOf(query.from), dayIndexOf(query.to)];
    const c = query.groupBy === 'day' ? undefined : usageCover(from, to);
    const params = c ? [...c.days[0], ...c.days[1], ...c.span8[0], ...c.span8[1], ...c.span64] : [from, to];
    const { rows } = await this.db.query<{ g: string | number; count: string; tokens: string }>(sql, [encodeKey(userId), ...params]);
    return groupUsage(
      rows.map((r) => ({
        group: query.groupBy === 'day' ? usageDayOfIndex(num(r.g)) : r.g === '' ? null : decodeKey(String(r.g)),
        count: num(r.count),
        tokens: num(r.tokens),
      })),
      query.groupBy,
    );
  }

  settle(generationId: string, amount: number, now: number = Date.now()): Promise<number | null> {
    return this.settleBy(this.sql.settle, generationId, amount, now);
  }

  /** `settle` by its statement (`release` counts no usage). */
  private async settleBy(sql: string, generationId: string, amount: number, now: number): Promise<number | null> {
    if (typeof amount !== 'number' || !Number.isFinite(amount)) {
      throw new RangeError(`settle amount must be a finite number, got ${String(amount)}`);
    }
    // Clamped to [0, reserve]: below zero would credit the user, above the reserve would break the invariant.
    const charge = Math.max(0, amount);
    const { rows } = await this.db.query<{ charged: string }>(sql, [
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

  release(generationId: string, now: number = Date.now()): Promise<number | null> {
    return this.settleBy(this.sql.release, generationId, 0, now);
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

  async openReserves(limit: number, after?: OpenReserveCursor): Promise<OpenReserve[]> {
    const { rows } =
      after === undefined
        ? await this.db.query(this.sql.openReserves, [limit])
        : await this.db.query(this.sql.openReservesAfter, [limit, after.createdAt, encodeKey(after.generationId)]);
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
  if (err instanceof InFlightLimit) return 'in_flight_limit';
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

/** Internal signal to roll back a reserve whose user is at the in-flight cap. */
class InFlightLimit extends Error {
  override readonly name = 'InFlightLimit' as const;
}

/** Internal signal to roll back a reserve whose debit found too little balance. */
class Insufficient extends Error {
  override readonly name = 'Insufficient' as const;
}
