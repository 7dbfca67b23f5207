import { randomBytes } from 'node:crypto';
import { inject, injectable } from 'tsyringe';
import { z } from 'zod';
import { MAX_TOKENS } from '../domain/amounts.js';
import { DomainError } from '../domain/errors.js';
import { newKeyId } from '../domain/ids.js';
import type { Clock } from '../ports/clock.js';
import type { ApiKeyInfo, ApiKeyResolver, ApiKeyStore, KeyBudget, KeyScope } from '../ports/api-keys.js';
import type { AuditEntry, AuditLog } from '../ports/audit.js';
import type { Ledger, OrganizationBudget, OrganizationRole, UsageGroupBy, UserLimitLedger, UserLimits } from '../ports/ledger.js';
import { budgetWindows } from '../domain/limits.js';
import { budgetWindow } from '../domain/rules.js';
import { TOKENS } from '../tokens.js';
import { check, checkUserId, invalid, PRINTABLE, unsupported, usageDays, userIdSchema } from './account-input.js';
import { type MemberInput, type NewOrganizationInput, type OrganizationLimitsInput, type OrganizationUsageInput, type OrganizationUsageView, type OrganizationView, Organizations } from './organizations.js';

export { USAGE_DEFAULT_DAYS, USAGE_MAX_DAYS } from './account-input.js';

const SCOPES = ['generate', 'read', 'priority'] as const satisfies readonly KeyScope[];
/** A new key's scopes when none are given (`priority` only when asked). */
const DEFAULT_SCOPES = ['generate', 'read'] as const satisfies readonly KeyScope[];
/** Token amounts: finite, and at most MAX_TOKENS (the bound every ledger keeps, domain/amounts.ts). */
const amountSchema = z.number().finite().nonnegative().max(MAX_TOKENS, `must be at most ${MAX_TOKENS}`);
const positiveAmountSchema = amountSchema.positive();

const newUserSchema = z.strictObject({ userId: userIdSchema, balance: amountSchema.optional() });
const creditSchema = z.strictObject({
  amount: positiveAmountSchema,
  reason: z.string().min(1).max(500).regex(PRINTABLE),
});
const newKeySchema = z.strictObject({
  name: z.string().min(1).max(100).regex(PRINTABLE),
  scopes: z
    .array(z.enum(SCOPES))
    .min(1)
    .max(SCOPES.length)
    .refine((s) => new Set(s).size === s.length, 'must not repeat a scope')
    .optional(),
  models: z.array(z.string().min(1).max(200).regex(PRINTABLE)).min(1).max(100).optional(),
  budget: z.strictObject({ amount: positiveAmountSchema, period: z.enum(['day', 'month']) }).optional(),
  maxInFlight: z.number().int().positive().max(1_000_000).optional(),
  expiresAt: z.iso.datetime({ offset: true }).optional(),
});
const userLimitsSchema = z.strictObject({
  budget: z.strictObject({ amount: positiveAmountSchema, period: z.enum(['day', 'month', 'total']) }).nullable().optional(),
  maxInFlight: z.number().int().positive().max(1_000_000).nullable().optional(),
});
const usageSchema = z.strictObject({
  from: z.iso.date().optional(),
  to: z.iso.date().optional(),
  groupBy: z.enum(['day', 'model', 'key', 'member']).optional(),
});

export type NewUserInput = z.input<typeof newUserSchema>;
export type CreditInput = z.input<typeof creditSchema>;
export type NewKeyInput = z.input<typeof newKeySchema>;
export type UsageInput = z.input<typeof usageSchema>;
/** `setUserLimits`: a field left out keeps its value, `null` removes that limit. */
export type UserLimitsInput = z.input<typeof userLimitsSchema>;

/** A user's own limits and what they hold now (like an organisation's). Times are ISO 8601. */
export interface UserLimitsView {
  userId: string;
  budget?: OrganizationBudget;
  maxInFlight?: number;
  /** Generations reserved and not yet finished since the user has had limits. */
  inFlight: number;
  /** With a budget: held plus charged in its current window, what is left of it, and when the window ends. */
  spent?: number;
  remaining?: number;
  resetsAt?: string;
}

/** A key as its owner and the host read it (never the secret): times are ISO 8601. */
export interface KeyView {
  keyId: string;
  userId: string;
  name: string;
  scopes: KeyScope[];
  models?: string[];
  budget?: KeyBudget;
  maxInFlight?: number;
  expiresAt?: string;
  createdAt: string;
  lastUsedAt?: string;
}

export interface UsageReportView {
  data: Array<({ period: string } | { modelId: string | null } | { keyId: string | null } | { userId: string }) & { count: number; tokens: number }>;
  total: { count: number; tokens: number };
}

export interface AuditView {
  data: Array<Omit<AuditEntry, 'at'> & { at: string }>;
  nextCursor: string | null;
}

/** Who performs an admin action, for the audit log. Default `host` (the host's own code). */
export interface ActorOption {
  actor?: string;
}

/**
 * Users, credits, keys and organisations: what a host (or its admin over HTTP) manages, each action audited. Every input is checked
 * whole before anything is written, and a bad one is a 400 naming its fields.
 */
@injectable()
export class Accounts {
  constructor(
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(TOKENS.KeyStore) private readonly keys: ApiKeyResolver,
    @inject(TOKENS.ApiKeys) private readonly resolver: ApiKeyResolver,
    @inject(TOKENS.AuditLog) private readonly audit: AuditLog,
    @inject(TOKENS.Clock) private readonly clock: Clock,
    @inject(Organizations) private readonly organizations: Organizations,
  ) {}

  /** Opens a user's account with a starting balance (default 0); 409 when the user already has one. */
  async createUser(input: NewUserInput, options: ActorOption = {}): Promise<{ userId: string; balance: number }> {
    const { userId, balance = 0 } = check(newUserSchema, input);
    if (!(await this.ledger.openAccount(userId, balance))) {
      throw new DomainError('conflict', `User "${userId}" already exists.`, {
        details: [{ field: 'userId', code: 'invalid_value', message: 'a user with this id already exists' }],
      });
    }
    await this.record(options, 'user.create', { userId, details: { balance } });
    return { userId, balance };
  }

  /** Adds tokens to a user's balance (opening the account when needed); answers the new balance. */
  async credit(userId: string, input: CreditInput, options: ActorOption = {}): Promise<{ balance: number }> {
    const id = checkUserId(userId);
    const { amount, reason } = check(creditSchema, input);
    await this.ledger.credit(id, amount).catch((err: unknown) => {
      // The amount is within the bound (checked above): the ledger refuses what the balance would then pass.
      if (!(err instanceof RangeError)) throw err;
      throw invalid([
        { field: 'amount', code: 'invalid_value', message: `amount would take the balance plus reserved of "${id}" past ${MAX_TOKENS} tokens` },
      ]);
    });
    await this.record(options, 'credits.add', { userId: id, details: { amount, reason } });
    return { balance: await this.ledger.balance(id) };
  }

  /** Issues a key; the answer is the only time its secret (`apiKey`) is shown. */
  async createKey(userId: string, input: NewKeyInput, options: ActorOption & { now?: number } = {}): Promise<KeyView & { apiKey: string }> {
    const id = checkUserId(userId);
    const spec = check(newKeySchema, input);
    const now = options.now ?? this.clock.now();
    const expiresAt = spec.expiresAt !== undefined ? Date.parse(spec.expiresAt) : undefined;
    if (expiresAt !== undefined && expiresAt <= now) {
      throw invalid([{ field: 'expiresAt', code: 'invalid_value', message: 'expiresAt must be in the future' }]);
    }
    const store = this.keyStore();
    const key = {
      keyId: newKeyId(),
      userId: id,
      name: spec.name,
      scopes: spec.scopes ?? [...DEFAULT_SCOPES],
      createdAt: now,
      ...(spec.models !== undefined ? { models: [...new Set(spec.models)] } : {}),
      ...(spec.budget !== undefined ? { budget: spec.budget } : {}),
      ...(spec.maxInFlight !== undefined ? { maxInFlight: spec.maxInFlight } : {}),
      ...(expiresAt !== undefined ? { expiresAt } : {}),
    } satisfies ApiKeyInfo;
    // 256 random bits: guessing one is hopeless, so a digest lookup needs no salt or slow hash.
    const apiKey = `gs_${randomBytes(32).toString('base64url')}`;
    await store.createKey(apiKey, key);
    await this.record(options, 'key.create', {
      userId: id,
      keyId: key.keyId,
      details: { name: key.name, scopes: key.scopes, models: key.models ?? null, budget: key.budget ?? null, maxInFlight: key.maxInFlight ?? null, expiresAt: spec.expiresAt ?? null },
    });
    return { ...keyView(key), apiKey };
  }

  /** A user's keys, oldest first, never their secrets; none when the host resolves keys itself (it keeps no key objects). */
  async listKeys(userId: string): Promise<KeyView[]> {
    const id = checkUserId(userId);
    if (typeof (this.keys as Partial<ApiKeyStore>).listKeys !== 'function') return [];
    return (await this.keyStore().listKeys(id)).map(keyView);
  }

  /**
   * Revokes a key: 404 when there is none with that id. Its next request fails on every instance; with `apiKeyCache`
   * on, other instances may accept it until their cached entry expires (`ttlMs`).
   */
  async revokeKey(keyId: string, options: ActorOption = {}): Promise<void> {
    if (typeof keyId !== 'string' || keyId.length === 0 || keyId.length > 200) throw new DomainError('not_found', 'No such key.');
    const store = this.keyStore();
    const key = await store.getKey(keyId);
    if (!key || !(await store.revokeKeyById(keyId))) throw new DomainError('not_found', 'No such key.');
    (this.resolver as { forgetKeyId?: (keyId: string) => void }).forgetKeyId?.(keyId);
    await this.record(options, 'key.revoke', { userId: key.userId, keyId, details: { name: key.name } });
  }

  /**
   * A user's settled spend by UTC day, model or key, from the ledger. `from` and `to` are `YYYY-MM-DD` days, both
   * counted; by default the last 30 days to today.
   */
  async usage(userId: string, input: UsageInput = {}, now: number = this.clock.now()): Promise<UsageReportView> {
    const q = check(usageSchema, input);
    const { from, to } = usageDays(q, now);
    if (q.groupBy === 'member') return this.organizations.usageOfMembers(userId, { from, to });
    const groupBy: UsageGroupBy = q.groupBy ?? 'day';
    const report = await this.ledger.usage(userId, { from, to, groupBy });
    const name = groupBy === 'day' ? 'period' : groupBy === 'model' ? 'modelId' : 'keyId';
    return {
      data: report.rows.map((r) => ({ [name]: r.group, count: r.count, tokens: r.tokens }) as UsageReportView['data'][number]),
      total: report.total,
    };
  }

  /**
   * Creates an organisation: `{ organizationId, budget?, maxInFlight?, weight? }`, where `budget` is a key's
   * (`{ amount, period }`, and `period` may also be `total`). 409 when it exists.
   */
  createOrganization(input: NewOrganizationInput, options: ActorOption = {}): Promise<OrganizationView> {
    return this.organizations.create(input, options.actor ?? 'host');
  }

  /**
   * Changes an organisation's `budget`, `maxInFlight` and `weight`: a field left out keeps its value, `null` removes
   * the budget or the cap. Held generations stay held; the new limits apply from the next create. 404 when none.
   */
  setOrganizationLimits(organizationId: string, input: OrganizationLimitsInput, options: ActorOption = {}): Promise<OrganizationView> {
    return this.organizations.setLimits(organizationId, input, options.actor ?? 'host');
  }

  /** An organisation with its members, in-flight count and budget spend; 404 when there is none. */
  organization(organizationId: string): Promise<OrganizationView> {
    return this.organizations.get(organizationId);
  }

  /** Adds a user to an organisation (404 without it; 409 when the user belongs to another). */
  addMember(organizationId: string, input: MemberInput, options: ActorOption = {}): Promise<{ organizationId: string; userId: string; role: OrganizationRole }> {
    return this.organizations.addMember(organizationId, input, options.actor ?? 'host');
  }

  /** Removes a member (404 when it is not one); its open generations stay reserved under the organisation. */
  removeMember(organizationId: string, userId: string, options: ActorOption = {}): Promise<void> {
    return this.organizations.removeMember(organizationId, userId, options.actor ?? 'host');
  }

  /** An organisation's settled spend by UTC day or by member (`groupBy`), like `usage`. */
  organizationUsage(organizationId: string, input: OrganizationUsageInput = {}): Promise<OrganizationUsageView> {
    return this.organizations.usage(organizationId, input);
  }

  /**
   * Sets a user's own budget (`{ amount, period: 'day' | 'month' | 'total' }`) and in-flight cap, held by every create's
   * reserve with the balance, the key and the organisation. A field left out keeps its value; `null` removes it.
   */
  async setUserLimits(userId: string, input: UserLimitsInput, options: ActorOption = {}): Promise<UserLimitsView> {
    const id = checkUserId(userId);
    const spec = check(userLimitsSchema, input);
    const ledger = this.userLimitLedger();
    const now = this.clock.now();
    const current = (await ledger.userLimits(id, budgetWindows(now)))?.limits ?? {};
    const budget = spec.budget === undefined ? current.budget : (spec.budget ?? undefined);
    const maxInFlight = spec.maxInFlight === undefined ? current.maxInFlight : (spec.maxInFlight ?? undefined);
    const limits: UserLimits = { ...(budget ? { budget } : {}), ...(maxInFlight !== undefined ? { maxInFlight } : {}) };
    await ledger.setUserLimits(id, limits);
    await this.record(options, 'user.limits.set', { userId: id, details: { budget: limits.budget ?? null, maxInFlight: limits.maxInFlight ?? null } });
    return this.userLimits(id, now);
  }

  /** A user's own limits and what they hold (`inFlight` 0 and no limits when none were ever set). */
  async userLimits(userId: string, now: number = this.clock.now()): Promise<UserLimitsView> {
    const id = checkUserId(userId);
    const state = await this.userLimitLedger().userLimits(id, budgetWindows(now));
    const view: UserLimitsView = { userId: id, ...(state?.limits ?? {}), inFlight: state?.inFlight ?? 0 };
    const budget = state?.limits.budget;
    if (budget) {
      view.spent = state.spent;
      view.remaining = Math.max(0, budget.amount - state.spent);
      if (budget.period !== 'total') view.resetsAt = new Date(budgetWindow(budget.period, now).end).toISOString();
    }
    return view;
  }

  /** The audit log, newest first; `cursor` is a previous page's `nextCursor`. */
  async auditLog(options: { cursor?: string; limit?: number } = {}): Promise<AuditView> {
    const limit = options.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) {
      throw invalid([{ field: 'limit', code: 'invalid_value', message: 'limit must be an integer from 1 to 200' }]);
    }
    if (options.cursor !== undefined && !/^[0-9]{1,16}$/.test(options.cursor)) {
      throw invalid([{ field: 'cursor', code: 'invalid_value', message: 'cursor must be a nextCursor this endpoint gave' }]);
    }
    const page = await this.audit.list({ limit, ...(options.cursor !== undefined ? { before: options.cursor } : {}) });
    return { data: page.entries.map((e) => ({ ...e, at: new Date(e.at).toISOString() })), nextCursor: page.nextCursor };
  }

  private userLimitLedger(): UserLimitLedger {
    const l = this.ledger as Partial<UserLimitLedger>;
    if (typeof l.setUserLimits !== 'function' || typeof l.userLimits !== 'function') {
      throw unsupported('User limits need a ledger that keeps them (setUserLimits, userLimits): the memory, SQLite and Postgres ledgers do.');
    }
    return l as UserLimitLedger;
  }

  private keyStore(): ApiKeyStore {
    const store = this.keys as Partial<ApiKeyStore>;
    if (typeof store.createKey !== 'function' || typeof store.listKeys !== 'function' || typeof store.revokeKeyById !== 'function') {
      throw unsupported('Managing keys needs `apiKeys` to be an ApiKeyStore (createKey, listKeys, getKey, revokeKeyById).');
    }
    return store as ApiKeyStore;
  }

  private record(
    options: ActorOption,
    action: AuditEntry['action'],
    fields: { userId?: string; keyId?: string; details?: Record<string, unknown> },
  ): Promise<void> {
    return this.audit.append({ at: this.clock.now(), actor: options.actor ?? 'host', action, ...fields });
  }
}

function keyView(key: ApiKeyInfo): KeyView {
  const view: KeyView = { keyId: key.keyId, userId: key.userId, name: key.name, scopes: key.scopes, createdAt: new Date(key.createdAt).toISOString() };
  if (key.models !== undefined) view.models = key.models;
  if (key.budget !== undefined) view.budget = key.budget;
  if (key.maxInFlight !== undefined) view.maxInFlight = key.maxInFlight;
  if (key.expiresAt !== undefined) view.expiresAt = new Date(key.expiresAt).toISOString();
  if (key.lastUsedAt !== undefined) view.lastUsedAt = new Date(key.lastUsedAt).toISOString();
  return view;
}

