import type {
  BudgetWindows,
  OrganizationLimits,
  OrganizationMember,
  OrganizationRecord,
  OrganizationRole,
  OrganizationState,
  OrganizationUsageQuery,
  UsageReport,
} from '../ports/ledger.js';
import { organizationWindowStart } from '../domain/limits.js';
import { dayIndexOf, groupUsage, usageDayIndex, usageDayOfIndex } from '../domain/usage.js';

/** What a reserve held on its organisation, kept with the reserve so that its settle gives back to the same place. */
export interface OrganizationHold {
  organizationId: string;
  /** The budget window's start, when the organisation had a budget. */
  window: number | undefined;
}

interface Held {
  record: OrganizationRecord;
  members: Map<string, OrganizationMember>;
  inFlight: number;
  /** Held plus charged, by window start. */
  spent: Map<number, number>;
  /** Settled spend by day, then by member. */
  usage: Map<number, Map<string, { count: number; tokens: number }>>;
}

/**
 * The memory ledger's organisations: records, members, and what their members' reserves hold. Every method is one
 * synchronous step, so the ledger's reserve checks and holds them with the balance without yielding.
 */
export class MemoryOrganizations {
  private readonly orgs = new Map<string, Held>();
  /** user id -> organisation id. */
  private readonly memberOf = new Map<string, string>();

  /** True when the organisation exists (an empty map costs the reserve of a host without organisations nothing). */
  get used(): boolean {
    return this.orgs.size > 0;
  }

  create(record: OrganizationRecord): boolean {
    if (this.orgs.has(record.organizationId)) return false;
    this.orgs.set(record.organizationId, { record: { ...record }, members: new Map(), inFlight: 0, spent: new Map(), usage: new Map() });
    return true;
  }

  setLimits(organizationId: string, limits: OrganizationLimits): boolean {
    const org = this.orgs.get(organizationId);
    if (!org) return false;
    const { budget: _b, maxInFlight: _m, ...rest } = org.record;
    org.record = {
      ...rest,
      weight: limits.weight,
      ...(limits.budget ? { budget: { ...limits.budget } } : {}),
      ...(limits.maxInFlight !== undefined ? { maxInFlight: limits.maxInFlight } : {}),
    };
    return true;
  }

  state(organizationId: string, windows: BudgetWindows): OrganizationState | null {
    const org = this.orgs.get(organizationId);
    if (!org) return null;
    const budget = org.record.budget;
    return {
      organization: { ...org.record },
      members: [...org.members.values()].map((m) => ({ ...m })).sort((a, b) => a.joinedAt - b.joinedAt || (a.userId < b.userId ? -1 : 1)),
      inFlight: org.inFlight,
      spent: budget ? (org.spent.get(organizationWindowStart(budget.period, windows)) ?? 0) : 0,
    };
  }

  addMember(organizationId: string, member: OrganizationMember): 'added' | 'no_organization' | 'member_elsewhere' {
    const org = this.orgs.get(organizationId);
    if (!org) return 'no_organization';
    const current = this.memberOf.get(member.userId);
    if (current !== undefined && current !== organizationId) return 'member_elsewhere';
    const existing = org.members.get(member.userId);
    org.members.set(member.userId, existing ? { ...existing, role: member.role } : { ...member });
    this.memberOf.set(member.userId, organizationId);
    return 'added';
  }

  removeMember(organizationId: string, userId: string): boolean {
    const org = this.orgs.get(organizationId);
    if (!org?.members.delete(userId)) return false;
    this.memberOf.delete(userId);
    return true;
  }

  membership(userId: string): { organizationId: string; role: OrganizationRole } | null {
    const organizationId = this.memberOf.get(userId);
    if (organizationId === undefined) return null;
    return { organizationId, role: this.orgs.get(organizationId)!.members.get(userId)!.role };
  }

  /** The user's organisation, or undefined. */
  of(userId: string): OrganizationRecord | undefined {
    const id = this.memberOf.get(userId);
    return id === undefined ? undefined : this.orgs.get(id)!.record;
  }

  /**
   * Whether `count` more reserves of `amount` in all fit the organisation's cap and budget: `ok` with what to hold,
   * or which limit refuses. Changes nothing: `hold` does, in the same synchronous step.
   */
  check(record: OrganizationRecord, count: number, amount: number, windows: BudgetWindows | undefined): 'limit_reached' | 'budget_exceeded' | OrganizationHold {
    const org = this.orgs.get(record.organizationId)!;
    if (record.maxInFlight !== undefined && org.inFlight + count > record.maxInFlight) return 'limit_reached';
    let window: number | undefined;
    if (record.budget) {
      window = organizationWindowStart(record.budget.period, windows ?? { day: 0, month: 0 });
      if ((org.spent.get(window) ?? 0) + amount > record.budget.amount) return 'budget_exceeded';
    }
    return { organizationId: record.organizationId, window };
  }

  hold(hold: OrganizationHold, count: number, amount: number): void {
    const org = this.orgs.get(hold.organizationId)!;
    org.inFlight += count;
    if (hold.window !== undefined) org.spent.set(hold.window, (org.spent.get(hold.window) ?? 0) + amount);
  }

  /** A settled reserve: its slot and unspent part given back, its charge counted for its owner on `now`'s day. */
  settled(hold: OrganizationHold, userId: string, reserved: number, charged: number, now: number, counted = true): void {
    const org = this.orgs.get(hold.organizationId);
    if (!org) return;
    org.inFlight -= 1;
    if (hold.window !== undefined) org.spent.set(hold.window, (org.spent.get(hold.window) ?? 0) - (reserved - charged));
    if (!counted) return;
    const day = usageDayIndex(now);
    let members = org.usage.get(day);
    if (!members) org.usage.set(day, (members = new Map()));
    const cell = members.get(userId);
    if (cell) {
      cell.count += 1;
      cell.tokens += charged;
    } else members.set(userId, { count: 1, tokens: charged });
  }

  usage(organizationId: string, query: OrganizationUsageQuery): UsageReport {
    const rows: { group: string | null; count: number; tokens: number }[] = [];
    const [from, to] = [dayIndexOf(query.from), dayIndexOf(query.to)];
    for (const [day, members] of this.orgs.get(organizationId)?.usage ?? []) {
      if (day < from || day > to) continue;
      for (const [userId, c] of members) rows.push({ group: query.groupBy === 'day' ? usageDayOfIndex(day) : userId, count: c.count, tokens: c.tokens });
    }
    return groupUsage(rows, query.groupBy);
  }
}
