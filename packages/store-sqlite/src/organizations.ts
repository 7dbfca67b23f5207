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
import { dayIndexOf, groupUsage, organizationWindowStart, usageDayIndex, usageDayOfIndex } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

interface OrganizationRow {
  id: string;
  budget_amount: number | null;
  budget_period: 'day' | 'month' | 'total' | null;
  max_in_flight: number | null;
  weight: number;
  in_flight: number;
  created_at: number;
}

/** What a reserve keeps of its organisation, so that its settle gives back there. */
export interface OrganizationReserveColumns {
  organization_id: string | null;
  organization_window: number | null;
}

/** Thrown inside a reserve's transaction to roll it back when the organisation's cap or budget refuses it. */
export class OrganizationRefused extends Error {
  override readonly name = 'OrganizationRefused' as const;
  constructor(
    readonly result: 'limit_reached' | 'budget_exceeded',
    readonly organization: OrganizationRecord,
  ) {
    super(result);
  }
}

function recordOf(row: OrganizationRow): OrganizationRecord {
  const record: OrganizationRecord = { organizationId: row.id, weight: row.weight, createdAt: row.created_at };
  if (row.budget_amount !== null && row.budget_period !== null) record.budget = { amount: row.budget_amount, period: row.budget_period };
  if (row.max_in_flight !== null) record.maxInFlight = row.max_in_flight;
  return record;
}

/**
 * The SQLite ledger's organisations. `hold` and `settled` run inside the ledger's IMMEDIATE transactions (the
 * database's write lock is held), so the cap and the budget are tested and written with the balance and the key.
 */
export class SqliteOrganizations {
  private readonly createStmt: Statement;
  private readonly setLimitsStmt: Statement;
  private readonly recordStmt: Statement;
  private readonly membersStmt: Statement;
  private readonly spentStmt: Statement;
  private readonly memberOfStmt: Statement;
  private readonly insertMemberStmt: Statement;
  private readonly setRoleStmt: Statement;
  private readonly removeMemberStmt: Statement;
  private readonly orgOfUserStmt: Statement;
  private readonly holdStmt: Statement;
  private readonly holdSpendStmt: Statement;
  private readonly markStmt: Statement;
  private readonly releaseStmt: Statement;
  private readonly releaseSpendStmt: Statement;
  private readonly addUsageStmt: Statement;
  private readonly usageStmts: Record<OrganizationUsageQuery['groupBy'], Statement>;
  private readonly addMemberTx: (organizationId: string, member: OrganizationMember) => 'added' | 'no_organization' | 'member_elsewhere';

  constructor(db: SqliteDatabase) {
    this.createStmt = db.prepare(
      `INSERT INTO organizations (id, budget_amount, budget_period, max_in_flight, weight, created_at)
       VALUES (@id, @budgetAmount, @budgetPeriod, @maxInFlight, @weight, @createdAt) ON CONFLICT (id) DO NOTHING`,
    );
    this.setLimitsStmt = db.prepare(
      'UPDATE organizations SET budget_amount = @budgetAmount, budget_period = @budgetPeriod, max_in_flight = @maxInFlight, weight = @weight WHERE id = @id',
    );
    this.recordStmt = db.prepare('SELECT id, budget_amount, budget_period, max_in_flight, weight, in_flight, created_at FROM organizations WHERE id = ?');
    this.membersStmt = db.prepare('SELECT user_id, role, joined_at FROM organization_members WHERE organization_id = ? ORDER BY joined_at, user_id');
    this.spentStmt = db.prepare('SELECT spent FROM organization_spend WHERE organization_id = ? AND window_start = ?');
    this.memberOfStmt = db.prepare('SELECT organization_id, role FROM organization_members WHERE user_id = ?');
    this.insertMemberStmt = db.prepare('INSERT INTO organization_members (user_id, organization_id, role, joined_at) VALUES (?, ?, ?, ?)');
    this.setRoleStmt = db.prepare('UPDATE organization_members SET role = ? WHERE user_id = ?');
    this.removeMemberStmt = db.prepare('DELETE FROM organization_members WHERE user_id = ? AND organization_id = ?');
    this.orgOfUserStmt = db.prepare(
      `SELECT o.id, o.budget_amount, o.budget_period, o.max_in_flight, o.weight, o.in_flight, o.created_at
         FROM organization_members m JOIN organizations o ON o.id = m.organization_id WHERE m.user_id = ?`,
    );
    this.holdStmt = db.prepare('UPDATE organizations SET in_flight = in_flight + ? WHERE id = ?');
    this.holdSpendStmt = db.prepare(
      `INSERT INTO organization_spend (organization_id, window_start, spent) VALUES (@id, @window, @amount)
       ON CONFLICT (organization_id, window_start) DO UPDATE SET spent = spent + excluded.spent WHERE spent + excluded.spent <= @limit`,
    );
    this.markStmt = db.prepare('UPDATE reserves SET organization_id = ?, organization_window = ? WHERE generation_id = ?');
    this.releaseStmt = db.prepare('UPDATE organizations SET in_flight = in_flight - 1 WHERE id = ?');
    this.releaseSpendStmt = db.prepare('UPDATE organization_spend SET spent = spent - ? WHERE organization_id = ? AND window_start = ?');
    this.addUsageStmt = db.prepare(
      `INSERT INTO organization_usage_daily (organization_id, day, user_id, count, tokens) VALUES (?, ?, ?, 1, ?)
       ON CONFLICT (organization_id, day, user_id) DO UPDATE SET count = count + 1, tokens = tokens + excluded.tokens`,
    );
    const usageSql = (column: string): string =>
      `SELECT ${column} AS g, sum(count) AS count, total(tokens) AS tokens FROM organization_usage_daily
        WHERE organization_id = ? AND day BETWEEN ? AND ? GROUP BY ${column}`;
    this.usageStmts = { day: db.prepare(usageSql('day')), member: db.prepare(usageSql('user_id')) };
    this.addMemberTx = db.transaction((organizationId: string, member: OrganizationMember) => {
      if (!this.recordStmt.get(organizationId)) return 'no_organization' as const;
      const current = this.memberOfStmt.get(member.userId) as { organization_id: string } | undefined;
      if (current && current.organization_id !== organizationId) return 'member_elsewhere' as const;
      if (current) this.setRoleStmt.run(member.role, member.userId);
      else this.insertMemberStmt.run(member.userId, organizationId, member.role, Math.trunc(member.joinedAt));
      return 'added' as const;
    }).immediate;
  }

  /**
   * Inside a reserve's transaction, after the balance and the key: the owner's organisation, its in-flight count and
   * its budget's window held for `generationIds` (already inserted), or `OrganizationRefused` thrown. Undefined
   * for a user of no organisation.
   */
  hold(userId: string, generationIds: readonly string[], amount: number, windows: BudgetWindows | undefined): OrganizationRecord | undefined {
    const row = this.orgOfUserStmt.get(userId) as OrganizationRow | undefined;
    if (!row) return undefined;
    const record = recordOf(row);
    if (record.maxInFlight !== undefined && row.in_flight + generationIds.length > record.maxInFlight) throw new OrganizationRefused('limit_reached', record);
    let window: number | null = null;
    if (record.budget) {
      window = organizationWindowStart(record.budget.period, windows ?? { day: 0, month: 0 });
      const held = amount <= record.budget.amount && this.holdSpendStmt.run({ id: row.id, window, amount, limit: record.budget.amount }).changes === 1;
      if (!held) throw new OrganizationRefused('budget_exceeded', record);
    }
    this.holdStmt.run(generationIds.length, row.id);
    for (const id of generationIds) this.markStmt.run(row.id, window, id);
    return record;
  }

  /** Inside a settle's transaction: the slot and the unspent part given back, the charge counted for its member. */
  settled(reserve: OrganizationReserveColumns & { user_id: string; amount: number }, charged: number, now: number, counted = true): void {
    if (reserve.organization_id === null) return;
    this.releaseStmt.run(reserve.organization_id);
    if (reserve.organization_window !== null) this.releaseSpendStmt.run(reserve.amount - charged, reserve.organization_id, reserve.organization_window);
    if (counted) this.addUsageStmt.run(reserve.organization_id, usageDayIndex(now), reserve.user_id, charged);
  }

  /** The user's organisation (a retried reserve's answer). */
  of(userId: string): OrganizationRecord | undefined {
    const row = this.orgOfUserStmt.get(userId) as OrganizationRow | undefined;
    return row ? recordOf(row) : undefined;
  }

  /** Replaces the limits; what is held stays (spend is kept per window, so a budget of another period counts anew). */
  setLimits(organizationId: string, limits: OrganizationLimits): boolean {
    return (
      this.setLimitsStmt.run({
        id: organizationId,
        budgetAmount: limits.budget?.amount ?? null,
        budgetPeriod: limits.budget?.period ?? null,
        maxInFlight: limits.maxInFlight ?? null,
        weight: limits.weight,
      }).changes === 1
    );
  }

  create(org: OrganizationRecord): boolean {
    return (
      this.createStmt.run({
        id: org.organizationId,
        budgetAmount: org.budget?.amount ?? null,
        budgetPeriod: org.budget?.period ?? null,
        maxInFlight: org.maxInFlight ?? null,
        weight: org.weight,
        createdAt: Math.trunc(org.createdAt),
      }).changes === 1
    );
  }

  state(organizationId: string, windows: BudgetWindows): OrganizationState | null {
    const row = this.recordStmt.get(organizationId) as OrganizationRow | undefined;
    if (!row) return null;
    const organization = recordOf(row);
    const members = this.membersStmt.all(organizationId) as Array<{ user_id: string; role: OrganizationRole; joined_at: number }>;
    const spent = organization.budget
      ? ((this.spentStmt.get(organizationId, organizationWindowStart(organization.budget.period, windows)) as { spent: number } | undefined)?.spent ?? 0)
      : 0;
    return {
      organization,
      members: members.map((m) => ({ userId: m.user_id, role: m.role, joinedAt: m.joined_at })),
      inFlight: row.in_flight,
      spent,
    };
  }

  addMember(organizationId: string, member: OrganizationMember): 'added' | 'no_organization' | 'member_elsewhere' {
    return this.addMemberTx(organizationId, member);
  }

  removeMember(organizationId: string, userId: string): boolean {
    return this.removeMemberStmt.run(userId, organizationId).changes === 1;
  }

  membership(userId: string): { organizationId: string; role: OrganizationRole } | null {
    const row = this.memberOfStmt.get(userId) as { organization_id: string; role: OrganizationRole } | undefined;
    return row ? { organizationId: row.organization_id, role: row.role } : null;
  }

  usage(organizationId: string, query: OrganizationUsageQuery): UsageReport {
    const rows = this.usageStmts[query.groupBy].all(organizationId, dayIndexOf(query.from), dayIndexOf(query.to)) as Array<{ g: string | number; count: number; tokens: number }>;
    return groupUsage(
      rows.map((r) => ({ group: query.groupBy === 'day' ? usageDayOfIndex(Number(r.g)) : String(r.g), count: r.count, tokens: r.tokens })),
      query.groupBy,
    );
  }
}
