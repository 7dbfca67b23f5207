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
} from '../ports/ledger.js';
import { type UserHold, MemoryUserLimits } from './user-limits.js';
import { type OrganizationHold, MemoryOrganizations } from './organizations.js';
import { type Settled, SettledTable } from './settled.js';
import { systemClock } from '../clock.js';
import type { Clock } from '../ports/clock.js';
import { assertTokenAmount, creditFits, MAX_TOKENS } from '../domain/amounts.js';
import { dayIndexOf, groupUsage, usageCover, usageDayIndex, usageDayOfIndex, USAGE_SPANS } from '../domain/usage.js';

export interface MemoryLedgerOptions {
  /** Starting balances by user id. */
  balances?: Record<string, number>;
  /** Where `now` comes from when a caller gives none. Default: the system clock (a service gives its own). */
  clock?: Clock;
}

interface Reserve {
  userId: string;
  amount: number;
  createdAt: number;
  sequence: number;
  modelId: string | undefined;
  keyId: string | undefined;
  /** The key window the reserve was held in (with keyId and a key limit). */
  window: string | undefined;
  /** What it holds on its owner's organisation, when the owner belonged to one. */
  org: OrganizationHold | undefined;
  /** What it holds on its owner's own limits, when the owner had any. */
  user: UserHold | undefined;
  /** Counted in its key's in-flight count (reserved with `keyMaxInFlight`). */
  keyCounted: boolean;
}

/**
 * Ledger held in Maps. Each method checks and writes in one synchronous step, so concurrent reserves in one
 * process can never overdraw. Not shared between processes: use a SQL ledger for more than one instance.
 */
export class MemoryLedger implements Ledger, OrganizationLedger, UserLimitLedger {
  /** `reserve` keeps the in-flight count (`ReserveOptions.maxInFlight`), by user, below. */
  readonly holdsInFlight = true;
  /** Open reserves by user (issue 36: the in-flight cap is the ledger's, checked in the reserve's own step). */
  private readonly inFlight = new Map<string, number>();
  private readonly accounts = new Map<string, AccountSnapshot>();
  /** Open reserves by generation id; a settle moves its reserve to `settledReserves`. */
  private readonly reserves = new Map<string, Reserve>();
  private readonly settledReserves = new Map<string, Settled>();
  private readonly settledKinds = new SettledTable();
  /** Held plus charged, by key and window start. */
  private readonly keySpent = new Map<string, number>();
  /** Open reserves counted against their key's in-flight cap, by key. */
  private readonly keyInFlight = new Map<string, number>();
  /** Settled spend by user, then by day, then by `model\u0000key`: what `usage` reads, never the reserves. */
  private readonly rollup = new Map<string, Map<number, Map<string, UsageCell>>>();
  /** Each day's totals by user (a report by day reads one entry per day, however many models and keys: issue 36). */
  private readonly dayTotals = new Map<string, Map<number, UsageCell>>();
  /** The same cells over aligned spans of 8 and 64 days (`USAGE_SPANS`), by user, then `span:start` (issue 36). */
  private readonly spanRollup = new Map<string, Map<string, Map<string, UsageCell>>>();
  /** The cells the last settle added to: the next settle of the same user, model and key on that day adds to them (no cell is ever removed). */
  private lastUsage: { userId: string; day: number; modelId: string | undefined; keyId: string | undefined; cells: UsageCell[] } | undefined;
  private sequence = 0;
  private readonly orgs = new MemoryOrganizations();
  private readonly userLimitsOf = new MemoryUserLimits();

  private readonly clock: Clock;

  constructor(options: MemoryLedgerOptions = {}) {
    this.clock = options.clock ?? systemClock;
    for (const [userId, amount] of Object.entries(options.balances ?? {})) this.creditNow(userId, amount, 'balance');
  }

  async reserve(userId: string, generationId: string, amount: number, now: number = this.clock.now(), options: ReserveOptions = {}): Promise<ReserveResult | ReserveOutcome> {
    return this.reserveNow(userId, generationId, amount, now, options) as ReserveResult | ReserveOutcome;
  }

  /** `reserve` in one synchronous step; `inStore` (the memory store's, `settleWith`): 'limited' when the owner has more limits. */
  reserveNow(userId: string, generationId: string, amount: number, now: number, options: ReserveOptions, inStore = false): ReserveResult | ReserveOutcome | 'limited' {
    assertAmount(amount, 'reserve amount');
    if (inStore && ((this.orgs.used && this.orgs.of(userId)) || (this.userLimitsOf.used && this.userLimitsOf.of(userId)))) return 'limited';
    const existing = this.reserves.get(generationId) ?? this.settledReserves.get(generationId);
    if (existing) {
      if (existing.userId !== userId) {
        // Ids are random, so this is a caller bug; answering 'ok' would let one user ride on another's reserve.
        throw new Error(`Generation ${generationId} is already reserved for another user`);
      }
      return this.answer('ok', userId);
    }
    return this.holdAll(userId, [{ generationId, amount, modelId: options.modelId }], now, options);
  }

  async reserveMany(userId: string, items: readonly ReserveItem[], now: number = this.clock.now(), options: ReserveOptions = {}): Promise<ReserveResult | ReserveOutcome> {
    for (const item of items) assertAmount(item.amount, 'reserve amount');
    let existing = 0;
    for (const item of items) {
      const r = this.reserves.get(item.generationId) ?? this.settledReserves.get(item.generationId);
      if (!r) continue;
      if (r.userId !== userId) throw new Error(`Generation ${item.generationId} is already reserved for another user`);
      existing++;
    }
    // A retry of the same batch: every reserve is already held. (Part of them cannot be: it is all or nothing.)
    if (existing > 0) {
      if (existing === items.length) return this.answer('ok', userId);
      throw new Error('reserveMany: some of these generations are already reserved');
    }
    return this.holdAll(userId, items, now, { ...options, modelId: undefined });
  }

  /** Checks every level (balance, key, organisation, the user's own limits), then holds on all of them: one synchronous step. */
  private holdAll(userId: string, items: readonly ReserveItem[], now: number, options: ReserveOptions): ReserveResult | ReserveOutcome {
    const limit = options.keyId !== undefined ? options.keyLimit : undefined;
    if (limit) assertAmount(limit.amount, 'key limit');
    let total = 0;
    for (const item of items) total += item.amount;
    const org = this.orgs.used ? this.orgs.of(userId) : undefined;
    const mine = this.userLimitsOf.used ? this.userLimitsOf.of(userId) : undefined;
    const account = this.accountOf(userId);
    if (account.balance < total) return this.outcome('insufficient', 'user', org, mine);
    const open = this.inFlight.get(userId) ?? 0;
    if (options.maxInFlight !== undefined && open + items.length > options.maxInFlight) return this.outcome('in_flight_limit', 'user', org, mine);
    let window: string | undefined;
    if (limit) {
      window = `${options.keyId!}\u0000${limit.windowStart}`;
      if ((this.keySpent.get(window) ?? 0) + total > limit.amount) return this.outcome('budget_exceeded', 'key', org, mine);
    }
    const keyCap = options.keyId !== undefined ? options.keyMaxInFlight : undefined;
    if (keyCap !== undefined && (this.keyInFlight.get(options.keyId!) ?? 0) + items.length > keyCap) return this.outcome('limit_reached', 'key', org, mine);
    let hold: OrganizationHold | undefined;
    if (org) {
      const checked = this.orgs.check(org, items.length, total, options.windows);
      if (typeof checked === 'string') return this.outcome(checked, 'organization', org, mine);
      hold = checked;
    }
    // The user's own limits last, as the SQL ledgers take them (balance, key, organisation, user).
    const userHold = mine ? this.userLimitsOf.check(userId, items.length, total, options.windows) : undefined;
    if (typeof userHold === 'string') return this.outcome(userHold, 'user', org, mine);
    if (hold) this.orgs.hold(hold, items.length, total);
    if (userHold) this.userLimitsOf.hold(userId, userHold, items.length, total);
    if (window !== undefined) this.keySpent.set(window, (this.keySpent.get(window) ?? 0) + total);
    if (keyCap !== undefined) this.keyInFlight.set(options.keyId!, (this.keyInFlight.get(options.keyId!) ?? 0) + items.length);
    // Counted only once no level can refuse any more (a refusal holds nothing at any level).
    this.inFlight.set(userId, open + items.length);
    account.balance -= total;
    account.reserved += total;
    for (const item of items) {
      this.reserves.set(item.generationId, {
        userId,
        amount: item.amount,
        createdAt: now,
        sequence: this.sequence++,
        modelId: item.modelId,
        keyId: options.keyId,
        window,
        org: hold,
        user: userHold,
        keyCounted: keyCap !== undefined,
      });
    }
    return this.outcome('ok', undefined, org, mine);
  }

  private answer(result: 'ok', userId: string): ReserveResult | ReserveOutcome {
    const org = this.orgs.used ? this.orgs.of(userId) : undefined;
    return this.outcome(result, undefined, org, this.userLimitsOf.used ? this.userLimitsOf.of(userId) : undefined);
  }

  /** A plain result without organisation or user limits (the shape of a ledger without them), an outcome with. */
  private outcome(result: ReserveResult, by: ReserveOutcome['refusedBy'], org: OrganizationRecord | undefined, mine: UserLimits | undefined): ReserveResult | ReserveOutcome {
    if (!org && !mine) return result;
    return { result, ...(by ? { refusedBy: by } : {}), ...(org ? { organization: { ...org } } : {}), ...(mine ? { userLimits: mine } : {}) };
  }

  async settle(generationId: string, amount: number, now: number = this.clock.now()): Promise<number | null> {
    return this.settleNow(generationId, amount, now);
  }

  /** `settle` as one synchronous step (also the memory store's, inside a change that carries it); `release` counts no usage. */
  settleNow(generationId: string, amount: number, now: number, counted = true): number | null {
    if (!Number.isFinite(amount)) throw new RangeError(`settle amount must be a finite number, got ${amount}`);
    const reserve = this.reserves.get(generationId);
    if (!reserve) return this.settledReserves.get(generationId)?.charged ?? null;
    const charged = Math.min(Math.max(amount, 0), reserve.amount);
    const account = this.accountOf(reserve.userId);
    account.reserved -= reserve.amount;
    account.settled += charged;
    account.balance += reserve.amount - charged;
    if (reserve.window !== undefined) {
      this.keySpent.set(reserve.window, (this.keySpent.get(reserve.window) ?? 0) - (reserve.amount - charged));
    }
    this.reserves.delete(generationId);
    this.settledReserves.set(generationId, this.settledKinds.of(reserve.userId, charged));
    this.inFlight.set(reserve.userId, (this.inFlight.get(reserve.userId) ?? 1) - 1);
    if (reserve.keyCounted) this.keyInFlight.set(reserve.keyId!, (this.keyInFlight.get(reserve.keyId!) ?? 0) - 1);
    if (reserve.user) this.userLimitsOf.settled(reserve.userId, reserve.user, reserve.amount, charged);
    if (reserve.org) this.orgs.settled(reserve.org, reserve.userId, reserve.amount, charged, now, counted);
    if (counted) this.addUsage(reserve, charged, now);
    return charged;
  }

  async release(generationId: string, now: number = this.clock.now()): Promise<number | null> {
    return this.settleNow(generationId, 0, now, false);
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
    this.userLimitsOf.set(userId, limits);
  }

  async userLimits(userId: string, windows: BudgetWindows): Promise<UserLimitState | null> {
    return this.userLimitsOf.state(userId, windows);
  }

  async keySpend(keyId: string, windowStart: number): Promise<number> {
    return this.keySpent.get(`${keyId}\u0000${windowStart}`) ?? 0;
  }

  async usage(userId: string, query: UsageQuery): Promise<UsageReport> {
    // Summed per group here, so the report is built from one row per group, not one per cell.
    const byGroup = new Map<string | null, { group: string | null; count: number; tokens: number }>();
    const add = (group: string | null, c: UsageCell): void => {
      const row = byGroup.get(group);
      if (row) {
        row.count += c.count;
        row.tokens += c.tokens;
      } else byGroup.set(group, { group, count: c.count, tokens: c.tokens });
    };
    const days = this.rollup.get(userId);
    const [from, to] = [dayIndexOf(query.from), dayIndexOf(query.to)];
    if (query.groupBy === 'day') {
      for (const [day, total] of this.dayTotals.get(userId) ?? []) if (day >= from && day <= to) add(usageDayOfIndex(day), total);
      return groupUsage([...byGroup.values()], query.groupBy);
    }
    // By model or key: whole spans where they fit, single days at the ends (usageCover).
    const pick = (c: UsageCell): string | null => (query.groupBy === 'model' ? c.modelId : c.keyId) ?? null;
    const cover = usageCover(from, to);
    for (const [a, b] of cover.days) for (let d = a; d <= b; d++) for (const c of days?.get(d)?.values() ?? []) add(pick(c), c);
    const spans = this.spanRollup.get(userId);
    const ranges: Array<[number, [number, number]]> = [[8, cover.span8[0]], [64, cover.span64], [8, cover.span8[1]]];
    for (const [span, [a, b]] of ranges) {
      for (let start = a; start <= b; start += span) for (const c of spans?.get(`${span}:${start}`)?.values() ?? []) add(pick(c), c);
    }
    return groupUsage([...byGroup.values()], query.groupBy);
  }

  private addUsage(reserve: Reserve, charged: number, now: number): void {
    const day = usageDayIndex(now);
    const last = this.lastUsage;
    if (last && last.day === day && last.userId === reserve.userId && last.modelId === reserve.modelId && last.keyId === reserve.keyId) {
      for (const cell of last.cells) {
        cell.count += 1;
        cell.tokens += charged;
      }
      return;
    }
    const cellKey = `${reserve.modelId ?? ''}\u0000${reserve.keyId ?? ''}`;
    const totals = inner(this.dayTotals, reserve.userId);
    let total = totals.get(day);
    if (!total) totals.set(day, (total = { count: 0, tokens: 0 }));
    const cells = [total, cellOf(inner(inner(this.rollup, reserve.userId), day), cellKey, reserve)];
    const spans = inner(this.spanRollup, reserve.userId);
    for (const span of USAGE_SPANS) cells.push(cellOf(inner(spans, `${span}:${day - (day % span)}`), cellKey, reserve));
    for (const cell of cells) {
      cell.count += 1;
      cell.tokens += charged;
    }
    this.lastUsage = { userId: reserve.userId, day, modelId: reserve.modelId, keyId: reserve.keyId, cells };
  }

  async balance(userId: string): Promise<number> {
    return this.accounts.get(userId)?.balance ?? 0;
  }

  async credit(userId: string, amount: number): Promise<void> {
    this.creditNow(userId, amount, 'credit amount');
  }

  async openAccount(userId: string, balance: number): Promise<boolean> {
    assertTokenAmount(balance, 'balance');
    if (this.accounts.has(userId)) return false;
    this.accountOf(userId).balance = balance;
    return true;
  }

  async account(userId: string): Promise<AccountSnapshot> {
    const account = this.accounts.get(userId);
    return account ? { ...account } : { balance: 0, reserved: 0, settled: 0 };
  }

  async listAccounts(limit: number, after?: string): Promise<AccountRow[]> {
    const ids = [...this.accounts.keys()].filter((id) => after === undefined || id > after).sort();
    return ids.slice(0, Math.max(0, limit)).map((userId) => ({ userId, ...this.accounts.get(userId)! }));
  }

  async openReserves(limit: number, after?: OpenReserveCursor): Promise<OpenReserve[]> {
    const past = (id: string, t: number): boolean => !after || t > after.createdAt || (t === after.createdAt && id > after.generationId);
    return [...this.reserves.entries()]
      .filter(([id, r]) => past(id, r.createdAt))
      .sort(([ia, a], [ib, b]) => a.createdAt - b.createdAt || (ia < ib ? -1 : ia > ib ? 1 : 0))
      .slice(0, Math.max(0, limit))
      .map(([generationId, r]) => ({ generationId, userId: r.userId, amount: r.amount, createdAt: r.createdAt }));
  }

  /** Checks and adds in one synchronous step, so racing credits can never pass the bound together. */
  private creditNow(userId: string, amount: number, what: string): void {
    assertTokenAmount(amount, what);
    const account = this.accounts.get(userId);
    if (account && !creditFits(account.balance + account.reserved, amount)) {
      throw new RangeError(`${what} ${amount} would take the balance of "${userId}" past ${MAX_TOKENS} tokens`);
    }
    (account ?? this.accountOf(userId)).balance += amount;
  }

  private accountOf(userId: string): AccountSnapshot {
    let account = this.accounts.get(userId);
    if (!account) {
      account = { balance: 0, reserved: 0, settled: 0 };
      this.accounts.set(userId, account);
    }
    return account;
  }
}

interface UsageCell {
  modelId?: string;
  keyId?: string;
  count: number;
  tokens: number;
}

/** The map under `key` in `outer`, made when missing. */
function inner<K, K2, V>(outer: Map<K, Map<K2, V>>, key: K): Map<K2, V> {
  let m = outer.get(key);
  if (!m) outer.set(key, (m = new Map()));
  return m;
}

/** The cell of `reserve`'s model and key in `cells`, made (empty) when missing. */
function cellOf(cells: Map<string, UsageCell>, cellKey: string, reserve: Reserve): UsageCell {
  let cell = cells.get(cellKey);
  if (!cell) {
    cell = { ...(reserve.modelId !== undefined ? { modelId: reserve.modelId } : {}), ...(reserve.keyId !== undefined ? { keyId: reserve.keyId } : {}), count: 0, tokens: 0 };
    cells.set(cellKey, cell);
  }
  return cell;
}

function assertAmount(amount: number, what: string): void {
  if (!Number.isFinite(amount) || amount < 0) {
    throw new RangeError(`${what} must be a finite number >= 0, got ${amount}`);
  }
}
