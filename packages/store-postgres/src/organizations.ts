import type {
  BudgetWindows,
  OrganizationLimits,
  OrganizationMember,
  OrganizationRecord,
  OrganizationRole,
  OrganizationState,
  OrganizationUsageQuery,
  UsageReport,
} from '@genservice/core/ports';
import { dayIndexOf, groupUsage, organizationWindowStart, usageDayOfIndex } from '@genservice/core/ports';
import { type PgDatabase, type Queryable, decodeKey, encodeKey, num } from './db.js';

/** The organisation statements, given the quoted schema. */
export function organizationSql(s: string): Record<
  'create' | 'setLimits' | 'record' | 'members' | 'addMember' | 'memberOf' | 'removeMember' | 'hold' | 'usageByDay' | 'usageByMember',
  string
> {
  return {
    create: `INSERT INTO ${s}.organizations (id, budget_amount, budget_period, max_in_flight, weight, created_at)
      VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
    // What is held stays: the spend and its window (a budget of another period starts its count at its next window).
    setLimits: `UPDATE ${s}.organizations SET budget_amount = $2, budget_period = $3, max_in_flight = $4, weight = $5 WHERE id = $1`,
    record: `SELECT id, budget_amount, budget_period, max_in_flight, weight, in_flight, spent, spent_window, created_at FROM ${s}.organizations WHERE id = $1`,
    members: `SELECT user_id, role, joined_at FROM ${s}.organization_members WHERE organization_id = $1 ORDER BY joined_at, user_id`,
    // A member of another organisation keeps its row (the WHERE refuses the update): no row answered means elsewhere
    // (or no such organisation, which the foreign key refuses first).
    addMember: `INSERT INTO ${s}.organization_members (user_id, organization_id, role, joined_at) VALUES ($1, $2, $3, $4)
      ON CONFLICT (user_id) DO UPDATE SET role = EXCLUDED.role WHERE ${s}.organization_members.organization_id = EXCLUDED.organization_id
      RETURNING 1`,
    memberOf: `SELECT organization_id, role FROM ${s}.organization_members WHERE user_id = $1`,
    removeMember: `DELETE FROM ${s}.organization_members WHERE user_id = $1 AND organization_id = $2`,
    // One row holds it all: the count, and the budget's spend in its window ($4 the day's start, $5 the month's: the
    // caller's windows, picked by the period as organizationWindowStart does). A window newer than the row's starts
    // it again; an older one (a clock behind another instance's) counts in the row's. The row lock serialises the
    // members' reserves; the cap and the budget are tested on what this answers (the caller rolls back past them),
    // and the window the reserves were counted in is written on them in the same statement.
    hold: `WITH o AS (
        UPDATE ${s}.organizations og SET
          in_flight = og.in_flight + $2,
          spent = CASE WHEN og.budget_amount IS NULL THEN og.spent
            WHEN w.start > og.spent_window THEN $3::numeric ELSE og.spent + $3::numeric END,
          spent_window = CASE WHEN og.budget_amount IS NULL THEN og.spent_window ELSE GREATEST(og.spent_window, w.start) END
        FROM (SELECT CASE budget_period WHEN 'day' THEN $4::bigint WHEN 'month' THEN $5::bigint ELSE 0 END AS start
              FROM ${s}.organizations WHERE id = $1) w
        WHERE og.id = $1
        RETURNING og.id, og.budget_amount, og.budget_period, og.max_in_flight, og.weight, og.in_flight, og.spent, og.spent_window, og.created_at
      ), m AS (
        UPDATE ${s}.reserves rs SET organization_window = o.spent_window FROM o
        WHERE rs.generation_id = ANY($6::text[]) AND o.budget_amount IS NOT NULL
        RETURNING 1
      )
      SELECT * FROM o`,
    usageByDay: `SELECT day AS g, sum(count)::bigint AS count, sum(tokens) AS tokens FROM ${s}.organization_usage_daily
      WHERE organization_id = $1 AND day BETWEEN $2 AND $3 GROUP BY day`,
    usageByMember: `SELECT user_id AS g, sum(count)::bigint AS count, sum(tokens) AS tokens FROM ${s}.organization_usage_daily
      WHERE organization_id = $1 AND day BETWEEN $2 AND $3 GROUP BY user_id`,
  };
}

/**
 * The settle's part for the key's in-flight count and the organisation: CTEs over `r` (the settled reserve), added to
 * the ledger's settle statement after `a` (the account) and `k` (the key's window). Each row is updated only once the
 * rows before it are (it reads their parts: account, key window, key count, organisation), so a settle takes its locks in the reserve's order (account, key, organisation) whatever order
 * Postgres runs the statement's other parts in: the two never deadlock. Its unspent part goes back to the window it
 * was counted in, while that window is still the row's.
 */
export function settleOrganizationCtes(s: string, day = '$4', counted: 'true' | 'false' = 'true'): string {
  return `, kf AS (
        UPDATE ${s}.key_in_flight kf SET in_flight = kf.in_flight - 1
        FROM r WHERE r.key_in_flight AND kf.key_id = r.key_id AND (SELECT count(*) FROM a) >= 0 AND (SELECT count(*) FROM k) >= 0
        RETURNING 1
      ), o AS (
        UPDATE ${s}.organizations og SET in_flight = og.in_flight - 1,
          spent = CASE WHEN og.spent_window = r.organization_window THEN og.spent - (r.amount - r.charged) ELSE og.spent END
        FROM r WHERE og.id = r.organization_id AND (SELECT count(*) FROM a) >= 0 AND (SELECT count(*) FROM k) >= 0
          AND (SELECT count(*) FROM kf) >= 0
        RETURNING 1
      ), ou AS (
        INSERT INTO ${s}.organization_usage_daily (organization_id, day, user_id, count, tokens)
        SELECT r.organization_id, ${day}::integer, r.user_id, 1, r.charged FROM r WHERE r.organization_id IS NOT NULL AND ${counted}
        ON CONFLICT (organization_id, day, user_id)
        DO UPDATE SET count = ${s}.organization_usage_daily.count + 1, tokens = ${s}.organization_usage_daily.tokens + EXCLUDED.tokens
        RETURNING 1
      )`;
}

interface OrganizationRow {
  id: string;
  budget_amount: string | null;
  budget_period: 'day' | 'month' | 'total' | null;
  max_in_flight: number | null;
  weight: number;
  in_flight: number;
  spent: string;
  spent_window: string;
  created_at: string;
}

export function organizationOf(row: OrganizationRow): OrganizationRecord {
  const record: OrganizationRecord = { organizationId: decodeKey(row.id), weight: Number(row.weight), createdAt: num(row.created_at) };
  if (row.budget_amount !== null && row.budget_period !== null) record.budget = { amount: num(row.budget_amount), period: row.budget_period };
  if (row.max_in_flight !== null) record.maxInFlight = Number(row.max_in_flight);
  return record;
}

/** Why a reserve rolled back at the organisation: the caller answers it as a refusal. */
export class OrganizationRefused extends Error {
  override readonly name = 'OrganizationRefused' as const;
  constructor(
    readonly result: 'limit_reached' | 'budget_exceeded',
    readonly organization: OrganizationRecord,
  ) {
    super(result);
  }
}

/**
 * Holds `generationIds` (already inserted, `amount` in all) on the organisation, inside the reserve's transaction
 * (after the account and the key, the order every transaction takes them in): its in-flight count and its budget's
 * window, in one statement. Throws `OrganizationRefused` (rolling the whole reserve back) when either would be
 * passed; answers the organisation.
 */
export async function holdOnOrganization(
  tx: Queryable,
  sql: ReturnType<typeof organizationSql>,
  organizationId: string,
  generationIds: readonly string[],
  amount: number,
  windows: BudgetWindows | undefined,
): Promise<OrganizationRecord> {
  const w = windows ?? { day: 0, month: 0 };
  const { rows } = await tx.query<OrganizationRow>(sql.hold, [organizationId, generationIds.length, amount, Math.trunc(w.day), Math.trunc(w.month), generationIds]);
  const row = rows[0];
  // A membership names an existing organisation (its foreign key), and organisations are never deleted.
  if (!row) throw new Error(`organisation ${organizationId} vanished during a reserve`);
  const record = organizationOf(row);
  if (record.maxInFlight !== undefined && Number(row.in_flight) > record.maxInFlight) throw new OrganizationRefused('limit_reached', record);
  if (record.budget && num(row.spent) > record.budget.amount) throw new OrganizationRefused('budget_exceeded', record);
  return record;
}

/** The `OrganizationLedger` methods of the Postgres ledger. */
export class PostgresOrganizations {
  private readonly sql: ReturnType<typeof organizationSql>;

  constructor(private readonly db: PgDatabase) {
    this.sql = organizationSql(db.s);
  }

  async create(org: OrganizationRecord): Promise<boolean> {
    const { rowCount } = await this.db.query(this.sql.create, [
      encodeKey(org.organizationId),
      org.budget?.amount ?? null,
      org.budget?.period ?? null,
      org.maxInFlight ?? null,
      org.weight,
      Math.trunc(org.createdAt),
    ]);
    return rowCount === 1;
  }

  async setLimits(organizationId: string, limits: OrganizationLimits): Promise<boolean> {
    const { rowCount } = await this.db.query(this.sql.setLimits, [
      encodeKey(organizationId),
      limits.budget?.amount ?? null,
      limits.budget?.period ?? null,
      limits.maxInFlight ?? null,
      limits.weight,
    ]);
    return rowCount === 1;
  }

  async state(organizationId: string, windows: BudgetWindows): Promise<OrganizationState | null> {
    const id = encodeKey(organizationId);
    const { rows } = await this.db.query<OrganizationRow>(this.sql.record, [id]);
    if (!rows[0]) return null;
    const organization = organizationOf(rows[0]);
    const members = await this.db.query<{ user_id: string; role: OrganizationRole; joined_at: string }>(this.sql.members, [id]);
    // The row's window is the latest any reserve counted in: older than the current one, nothing is spent in it yet.
    const spent = organization.budget && num(rows[0].spent_window) >= organizationWindowStart(organization.budget.period, windows) ? num(rows[0].spent) : 0;
    return {
      organization,
      members: members.rows.map((m) => ({ userId: decodeKey(m.user_id), role: m.role, joinedAt: num(m.joined_at) })),
      inFlight: Number(rows[0].in_flight),
      spent,
    };
  }

  async addMember(organizationId: string, member: OrganizationMember): Promise<'added' | 'no_organization' | 'member_elsewhere'> {
    try {
      const { rowCount } = await this.db.query(this.sql.addMember, [encodeKey(member.userId), encodeKey(organizationId), member.role, Math.trunc(member.joinedAt)]);
      return rowCount === 1 ? 'added' : 'member_elsewhere';
    } catch (err) {
      // 23503: the foreign key found no such organisation.
      if ((err as { code?: string; cause?: { code?: string } }).code === '23503' || (err as { cause?: { code?: string } }).cause?.code === '23503') return 'no_organization';
      throw err;
    }
  }

  async removeMember(organizationId: string, userId: string): Promise<boolean> {
    const { rowCount } = await this.db.query(this.sql.removeMember, [encodeKey(userId), encodeKey(organizationId)]);
    return rowCount === 1;
  }

  async membership(userId: string): Promise<{ organizationId: string; role: OrganizationRole } | null> {
    const { rows } = await this.db.query<{ organization_id: string; role: OrganizationRole }>(this.sql.memberOf, [encodeKey(userId)]);
    return rows[0] ? { organizationId: decodeKey(rows[0].organization_id), role: rows[0].role } : null;
  }

  async usage(organizationId: string, query: OrganizationUsageQuery): Promise<UsageReport> {
    const sql = query.groupBy === 'day' ? this.sql.usageByDay : this.sql.usageByMember;
    const { rows } = await this.db.query<{ g: string | number; count: string; tokens: string }>(sql, [
      encodeKey(organizationId),
      dayIndexOf(query.from),
      dayIndexOf(query.to),
    ]);
    return groupUsage(
      rows.map((r) => ({
        group: query.groupBy === 'day' ? usageDayOfIndex(num(r.g)) : decodeKey(String(r.g)),
        count: num(r.count),
        tokens: num(r.tokens),
      })),
      query.groupBy,
    );
  }
}
