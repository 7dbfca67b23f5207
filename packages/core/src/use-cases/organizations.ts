import { inject, injectable } from 'tsyringe';
import { z } from 'zod';
import { MAX_TOKENS } from '../domain/amounts.js';
import { DomainError } from '../domain/errors.js';
import { budgetWindows, MAX_ORGANIZATION_WEIGHT } from '../domain/limits.js';
import { budgetWindow } from '../domain/rules.js';
import type { Clock } from '../ports/clock.js';
import type { AuditEntry, AuditLog } from '../ports/audit.js';
import type { Ledger, OrganizationBudget, OrganizationLedger, OrganizationLimits, OrganizationRecord, OrganizationRole, OrganizationUsageGroupBy } from '../ports/ledger.js';
import { TOKENS } from '../tokens.js';
import { check, checkUserId, PRINTABLE, unsupported, usageDays } from './account-input.js';


const organizationIdSchema = z.string().min(1).max(200).regex(PRINTABLE);
const newOrganizationSchema = z.strictObject({
  organizationId: organizationIdSchema,
  budget: z.strictObject({ amount: z.number().finite().positive().max(MAX_TOKENS, `must be at most ${MAX_TOKENS}`), period: z.enum(['day', 'month', 'total']) }).optional(),
  maxInFlight: z.number().int().positive().max(1_000_000).optional(),
  weight: z.number().int().positive().max(MAX_ORGANIZATION_WEIGHT).optional(),
});
const organizationLimitsSchema = z.strictObject({
  budget: newOrganizationSchema.shape.budget.unwrap().nullable().optional(),
  maxInFlight: newOrganizationSchema.shape.maxInFlight.unwrap().nullable().optional(),
  weight: newOrganizationSchema.shape.weight,
});
const memberSchema = z.strictObject({ userId: z.string().min(1).max(200).regex(PRINTABLE), role: z.enum(['member', 'admin']).optional() });
const organizationUsageSchema = z.strictObject({
  from: z.iso.date().optional(),
  to: z.iso.date().optional(),
  groupBy: z.enum(['day', 'member']).optional(),
});

export type NewOrganizationInput = z.input<typeof newOrganizationSchema>;
/** `setOrganizationLimits`: a field left out keeps its value, `null` removes a budget or a cap. */
export type OrganizationLimitsInput = z.input<typeof organizationLimitsSchema>;
export type MemberInput = z.input<typeof memberSchema>;
export type OrganizationUsageInput = z.input<typeof organizationUsageSchema>;

/** An organisation as the host reads it: limits, members, what it holds now. Times are ISO 8601. */
export interface OrganizationView {
  organizationId: string;
  budget?: OrganizationBudget;
  maxInFlight?: number;
  weight: number;
  createdAt: string;
  members: Array<{ userId: string; role: OrganizationRole; joinedAt: string }>;
  /** Its members' generations reserved and not yet finished. */
  inFlight: number;
  /** With a budget: held plus charged in its current window, what is left of it, and when the window ends. */
  spent?: number;
  remaining?: number;
  resetsAt?: string;
}

export interface OrganizationUsageView {
  data: Array<({ period: string } | { userId: string }) & { count: number; tokens: number }>;
  total: { count: number; tokens: number };
}

/**
 * Organisations (issue 40): created, given members, read, each write audited. Their limits are held by the ledger
 * in every create's reserve (`Lifecycle.reserve`); here they are managed and read. `service.accounts` answers for it.
 */
@injectable()
export class Organizations {
  constructor(
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(TOKENS.AuditLog) private readonly audit: AuditLog,
    @inject(TOKENS.Clock) private readonly clock: Clock,
  ) {}

  /** Creates an organisation (weight 1 by default); 409 when one with that id exists. */
  async create(input: NewOrganizationInput, actor: string): Promise<OrganizationView> {
    const spec = check(newOrganizationSchema, input);
    const now = this.clock.now();
    const record: OrganizationRecord = {
      organizationId: spec.organizationId,
      weight: spec.weight ?? 1,
      createdAt: now,
      ...(spec.budget !== undefined ? { budget: spec.budget } : {}),
      ...(spec.maxInFlight !== undefined ? { maxInFlight: spec.maxInFlight } : {}),
    };
    if (!(await this.orgs().createOrganization(record))) {
      throw new DomainError('conflict', `Organization "${record.organizationId}" already exists.`, {
        details: [{ field: 'organizationId', code: 'invalid_value', message: 'an organization with this id already exists' }],
      });
    }
    await this.record(actor, 'organization.create', {
      details: { organizationId: record.organizationId, budget: record.budget ?? null, maxInFlight: record.maxInFlight ?? null, weight: record.weight },
    });
    return this.get(record.organizationId, now);
  }

  /**
   * Changes its limits: a field left out keeps its value, `null` removes the budget or the cap (the weight is always
   * one). What its members hold stays held and settles as before; the new limits apply from the next create. 404 when
   * there is none.
   */
  async setLimits(organizationId: string, input: OrganizationLimitsInput, actor: string): Promise<OrganizationView> {
    const id = checkOrganizationId(organizationId);
    const spec = check(organizationLimitsSchema, input);
    const now = this.clock.now();
    const current = await this.orgs().organization(id, budgetWindows(now));
    if (!current) throw noSuchOrganization();
    const was = current.organization;
    const budget = spec.budget === undefined ? was.budget : (spec.budget ?? undefined);
    const maxInFlight = spec.maxInFlight === undefined ? was.maxInFlight : (spec.maxInFlight ?? undefined);
    const limits: OrganizationLimits = { weight: spec.weight ?? was.weight, ...(budget ? { budget } : {}), ...(maxInFlight !== undefined ? { maxInFlight } : {}) };
    // Removed between the read and the write: none exists now (organisations are never deleted today, but say so).
    if (!(await this.orgs().setOrganizationLimits(id, limits))) throw noSuchOrganization();
    await this.record(actor, 'organization.limits.set', {
      details: { organizationId: id, budget: limits.budget ?? null, maxInFlight: limits.maxInFlight ?? null, weight: limits.weight },
    });
    return this.get(id, now);
  }

  /** The organisation with its members, in-flight count and budget spend; 404 when there is none. */
  async get(organizationId: string, now: number = this.clock.now()): Promise<OrganizationView> {
    const state = await this.orgs().organization(checkOrganizationId(organizationId), budgetWindows(now));
    if (!state) throw noSuchOrganization();
    const { organization: o } = state;
    const view: OrganizationView = {
      organizationId: o.organizationId,
      ...(o.budget !== undefined ? { budget: o.budget } : {}),
      ...(o.maxInFlight !== undefined ? { maxInFlight: o.maxInFlight } : {}),
      weight: o.weight,
      createdAt: new Date(o.createdAt).toISOString(),
      members: state.members.map((m) => ({ userId: m.userId, role: m.role, joinedAt: new Date(m.joinedAt).toISOString() })),
      inFlight: state.inFlight,
    };
    if (o.budget) {
      view.spent = state.spent;
      view.remaining = Math.max(0, o.budget.amount - state.spent);
      if (o.budget.period !== 'total') view.resetsAt = new Date(budgetWindow(o.budget.period, now).end).toISOString();
    }
    return view;
  }

  /**
   * Adds a user (role `member` by default; adding a member again sets its role). 404 without the organisation, 409
   * when the user belongs to another one: a user belongs to at most one.
   */
  async addMember(organizationId: string, input: MemberInput, actor: string): Promise<{ organizationId: string; userId: string; role: OrganizationRole }> {
    const id = checkOrganizationId(organizationId);
    const { userId, role = 'member' } = check(memberSchema, input);
    const added = await this.orgs().addMember(id, { userId, role, joinedAt: this.clock.now() });
    if (added === 'no_organization') throw noSuchOrganization();
    if (added === 'member_elsewhere') {
      throw new DomainError('conflict', `User "${userId}" belongs to another organization; remove it there first.`, {
        details: [{ field: 'userId', code: 'invalid_value', message: 'the user belongs to another organization' }],
      });
    }
    await this.record(actor, 'organization.member.add', { userId, details: { organizationId: id, role } });
    return { organizationId: id, userId, role };
  }

  /**
   * Removes a member (404 when it is not one). It releases nothing: the member's open generations stay reserved,
   * and settle against the organisation they were reserved under.
   */
  async removeMember(organizationId: string, userId: string, actor: string): Promise<void> {
    const id = checkOrganizationId(organizationId);
    const user = checkUserId(userId);
    if (!(await this.orgs().removeMember(id, user))) throw new DomainError('not_found', 'No such organization member.');
    await this.record(actor, 'organization.member.remove', { userId: user, details: { organizationId: id } });
  }

  /** The organisation's settled spend by day or by member; 404 when there is none. */
  async usage(organizationId: string, input: OrganizationUsageInput = {}, now: number = this.clock.now()): Promise<OrganizationUsageView> {
    const id = checkOrganizationId(organizationId);
    const q = check(organizationUsageSchema, input);
    const days = usageDays(q, now);
    // One read to tell a missing organisation (404) from one with no spend.
    if (!(await this.orgs().organization(id, budgetWindows(now)))) throw noSuchOrganization();
    return this.report(id, { ...days, groupBy: q.groupBy ?? 'day' });
  }

  /**
   * `GET /v1/usage?groupBy=member`: the caller's organisation's spend by member, for an admin of it only (403 for
   * a member who is not its admin and for a user of no organisation: no one reads another's spend otherwise).
   */
  async usageOfMembers(userId: string, days: { from: string; to: string }): Promise<OrganizationUsageView> {
    const membership = typeof this.ledger.membership === 'function' ? await this.ledger.membership(userId) : null;
    if (membership?.role !== 'admin') {
      throw new DomainError('forbidden', 'groupBy=member is for an admin of an organization: it shows every member\u2019s spend.');
    }
    return this.report(membership.organizationId, { ...days, groupBy: 'member' });
  }

  private async report(organizationId: string, query: { from: string; to: string; groupBy: OrganizationUsageGroupBy }): Promise<OrganizationUsageView> {
    const report = await this.orgs().organizationUsage(organizationId, query);
    const name = query.groupBy === 'day' ? 'period' : 'userId';
    return { data: report.rows.map((r) => ({ [name]: r.group, count: r.count, tokens: r.tokens }) as OrganizationUsageView['data'][number]), total: report.total };
  }

  private orgs(): OrganizationLedger {
    const l = this.ledger as Partial<OrganizationLedger>;
    const methods = ['createOrganization', 'setOrganizationLimits', 'organization', 'addMember', 'removeMember', 'membership', 'organizationUsage'] as const;
    if (methods.some((m) => typeof l[m] !== 'function')) {
      throw unsupported(`Organisations need a ledger that keeps them (${methods.join(', ')}): the memory, SQLite and Postgres ledgers do.`);
    }
    return l as OrganizationLedger;
  }

  private record(actor: string, action: AuditEntry['action'], fields: { userId?: string; details?: Record<string, unknown> }): Promise<void> {
    return this.audit.append({ at: this.clock.now(), actor, action, ...fields });
  }
}

function checkOrganizationId(organizationId: string): string {
  const parsed = organizationIdSchema.safeParse(organizationId);
  // Like a missing one: an id that could not exist names no organisation.
  if (!parsed.success) throw noSuchOrganization();
  return parsed.data;
}

function noSuchOrganization(): DomainError {
  return new DomainError('not_found', 'No such organization.');
}
