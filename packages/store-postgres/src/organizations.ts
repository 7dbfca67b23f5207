import type {
  BudgetWindows,
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
  'create' | 'record' | 'members' | 'spent' | 'addMember' | 'memberOf' | 'removeMember' | 'hold' | 'holdSpend' | 'usageByDay' | 'usageByMember',
  string
> {
  return {
    create: `INSERT INTO ${s}.organizations (id, budget_amount, budget_period, max_in_flight, weight, created_at)
      VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
    record: `SELECT id, budget_amount, budget_period, max_in_flight, weight, in_flight, created_at FROM ${s}.organizations WHERE id = $1`,
    members: `SELECT user_id, role, joined_at FROM ${s}.organization_members WHERE organization_id = $1 ORDER BY joined_at, user_id`,
    spent: `SELECT spent FROM ${s}.organization_spend WHERE organization_id = $1 AND window_start = $2`,
    // A member of another organisation keeps its row (the WHERE refuses the update): no row answered means elsewhere
    // (or no such organisation, which the foreign key refuses first).
    addMember: `INSERT INTO ${s}.organization_members (user_id, organization_id, role, joined_at) VALUES ($1, $2, $3, $4)
      ON CONFLICT (user_id) DO UPDATE SET role = EXCLUDED.role WHERE ${s}.organization_members.organization_id = EXCLUDED.organization_id
      RETURNING 1`,
    memberOf: `SELECT organization_id, role FROM ${s}.organization_members WHERE user_id = $1`,
    removeMember: `DELETE FROM ${s}.organization_members WHERE user_id = $1 AND organization_id = $2`,
    // The organisation's row lock serialises its members' reserves; the cap is tested on the count after this one.
    hold: `UPDATE ${s}.organizations SET in_flight = in_flight + $2 WHERE id = $1
      RETURNING id, budget_amount, budget_period, max_in_flight, weight, in_flight, created_at`,
    // The window's spend, held as key_spend is, and the window written on the reserves (their settle gives back
    // there) in the same statement: no row updated means the budget refused.
    holdSpend: `WITH h AS (
        INSERT INTO ${s}.organization_spend (organization_id, window_start, spent) VALUES ($1, $2, $3)
        ON CONFLICT (organization_id, window_start) DO UPDATE SET spent = ${s}.organization_spend.spent + EXCLUDED.spent
        WHERE ${s}.organization_spend.spent + EXCLUDED.spent <= $4::numeric
        RETURNING 1
      )
      UPDATE ${s}.reserves SET organization_window = $2 WHERE generation_id = ANY($5::text[]) AND EXISTS (SELECT 1 FROM h)`,
    usageByDay: `SELECT day AS g, sum(count)::bigint AS count, sum(tokens) AS tokens FROM ${s}.organization_usage_daily
      WHERE organization_id = $1 AND day BETWEEN $2 AND $3 GROUP BY day`,
    usageByMember: `SELECT user_id AS g, sum(count)::bigint AS count, sum(tokens) AS tokens FROM ${s}.organization_usage_daily
      WHERE organization_id = $1 AND day BETWEEN $2 AND $3 GROUP BY user_id`,
  };
}

/** The settle's part for organisations: CTEs over `r` (the settled reserve), added to the ledger's settle statement. */
export function settleOrganizationCtes(s: string): string {
  return `, o AS (
        UPDATE ${s}.organizations og SET in_flight = og.in_flight - 1
        FROM r WHERE og.id = r.organization_id
        RETURNING 1
      ), os AS (
        UPDATE ${s}.organization_spend sp SET spent = sp.spent - (r.amount - r.charged)
        FROM r WHERE sp.organization_id = r.organization_id AND sp.window_start = r.organization_window
        RETURNING 1
      ), ou AS (
        INSERT INTO ${s}.organization_usage_daily (organization_id, day, user_id, count, tokens)
        SELECT r.organization_id, $4::integer, r.user_id, 1, r.charged FROM r WHERE r.organization_id IS NOT NULL
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
 * Holds `count` reserves of `amount` in all on the organisation, inside the reserve's transaction (after the account
 * and the key, the order every transaction takes them in): its in-flight count, then its budget's window. Throws
 * `OrganizationRefused` (rolling the whole reserve back) when either would be passed; answers the organisation.
 */
export async function holdOnOrganization(
  tx: Queryable,
  sql: ReturnType<typeof organizationSql>,
  organizationId: string,
  generationIds: readonly string[],
  amount: number,
  windows: BudgetWindows | undefined,
): Promise<OrganizationRecord> {
  const { rows } = await tx.query<OrganizationRow>(sql.hold, [organizationId, generationIds.length]);
  const row = rows[0];
  // A membership row always names an existing organisation (foreign key), so a missing row is a caller-less race
  // with nothing: treat it as no organisation at all.
  if (!row) throw new Error(`organisation ${organizationId} vanished during a reserve`);
  const record = organizationOf(row);
  if (record.maxInFlight !== undefined && Number(row.in_flight) > record.maxInFlight) throw new OrganizationRefused('limit_reached', record);
  if (record.budget) {
    if (amount > record.budget.amount) throw new OrganizationRefused('budget_exceeded', record);
    const window = organizationWindowStart(record.budget.period, windows ?? { day: 0, month: 0 });
    const held = await tx.query(sql.holdSpend, [organizationId, window, amount, record.budget.amount, generationIds]);
    if (held.rowCount !== generationIds.length) throw new OrganizationRefused('budget_exceeded', record);
  }
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

  async state(organizationId: string, windows: BudgetWindows): Promise<OrganizationState | null> {
    const id = encodeKey(organizationId);
    const { rows } = await this.db.query<OrganizationRow>(this.sql.record, [id]);
    if (!rows[0]) return null;
    const organization = organizationOf(rows[0]);
    const members = await this.db.query<{ user_id: string; role: OrganizationRole; joined_at: string }>(this.sql.members, [id]);
    let spent = 0;
    if (organization.budget) {
      const spend = await this.db.query<{ spent: string }>(this.sql.spent, [id, organizationWindowStart(organization.budget.period, windows)]);
      spent = spend.rows[0] ? num(spend.rows[0].spent) : 0;
    }
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
