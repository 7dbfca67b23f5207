/**
 * `budget_exceeded`: a budget for the window would be passed (the key's, or the organisation's: see
 * `ReserveOutcome.refusedBy`); `limit_reached`: the key or the organisation is at its in-flight cap;
 * `in_flight_limit`: the user already has `maxInFlight` open reserves (only a ledger with `holdsInFlight` answers it).
 */
export type ReserveResult = 'ok' | 'insufficient' | 'budget_exceeded' | 'limit_reached' | 'in_flight_limit';

/** An organisation's budget: at most `amount` tokens held or charged per UTC day, UTC month, or in all (`total`). */
export interface OrganizationBudget {
  amount: number;
  period: 'day' | 'month' | 'total';
}

/** An organisation as the ledger keeps it: its limits, which its members' reserves are held within. */
export interface OrganizationRecord {
  organizationId: string;
  budget?: OrganizationBudget;
  /** Its members' generations reserved and not yet settled, at most. */
  maxInFlight?: number;
  /** Its share of the runner when all are busy (a positive integer; 1 by default). */
  weight: number;
  createdAt: number;
}

/** The limits of an organisation a host may change after creating it. */
export type OrganizationLimits = Pick<OrganizationRecord, 'budget' | 'maxInFlight' | 'weight'>;

/** `admin`: may read the organisation's usage by member (`GET /v1/usage?groupBy=member`). */
export type OrganizationRole = 'member' | 'admin';

export interface OrganizationMember {
  userId: string;
  role: OrganizationRole;
  joinedAt: number;
}

/** The starts of the windows a budget may count in, as the caller's rule (`budgetWindow`) has them for `now`. */
export interface BudgetWindows {
  day: number;
  month: number;
}

/** An organisation, its members (oldest first) and what it holds now. */
export interface OrganizationState {
  organization: OrganizationRecord;
  members: OrganizationMember[];
  /** Its members' reserves not yet settled (each counted in the organisation it was reserved under). */
  inFlight: number;
  /** Held plus charged in the budget's current window (`windows`); 0 without a budget. */
  spent: number;
}

/**
 * A reserve's answer as an object, which a ledger that keeps organisations gives when the owner belongs to one (a
 * plain `ReserveResult` means no organisation was involved).
 */
export interface ReserveOutcome {
  result: ReserveResult;
  /**
   * Which level refused it: the user (its balance for `insufficient`, its own budget or cap otherwise), the key's
   * budget or cap, or the organisation's budget or cap.
   */
  refusedBy?: 'user' | 'key' | 'organization';
  /** The owner's organisation as the reserve read it (in the same atomic step). */
  organization?: OrganizationRecord;
  /** The owner's own limits as the reserve read it, when it has any (`UserLimitLedger`). */
  userLimits?: UserLimits;
}

/** A user's own limits, within its organisation's: a budget (held plus charged per window) and an in-flight cap. */
export interface UserLimits {
  budget?: OrganizationBudget;
  /** The user's generations reserved and not yet settled, at most (within the service-wide `inFlightPerUser`). */
  maxInFlight?: number;
}

/** A user's limits and what its reserves hold on them now. */
export interface UserLimitState {
  limits: UserLimits;
  /** Reserves not yet settled that were held on the limits (made since the user has had limits set). */
  inFlight: number;
  /** Held plus charged in the budget's current window (`windows`); 0 without a budget. */
  spent: number;
}

/**
 * Users' own limits, kept by the ledger so that a reserve holds them in its own atomic step (with the balance, the key
 * and the organisation), like an organisation's. Counting starts when a user's limits are first set: reserves open
 * before then are not counted (nor given back). A settle gives back to the limits its reserve was held on.
 */
export interface UserLimitLedger {
  /** Sets (replaces) the user's limits; `{}` clears them. What is held stays counted. */
  setUserLimits(userId: string, limits: UserLimits): Promise<void>;
  /** The user's limits and what they hold, or null when none were ever set. */
  userLimits(userId: string, windows: BudgetWindows): Promise<UserLimitState | null>;
}

export type OrganizationUsageGroupBy = 'day' | 'member';

export interface OrganizationUsageQuery {
  from: string;
  to: string;
  groupBy: OrganizationUsageGroupBy;
}

export interface AccountSnapshot {
  /** Spendable tokens. */
  balance: number;
  /** Held by open reserves. */
  reserved: number;
  /** Charged by settled generations, over all time. */
  settled: number;
}

/** One account of `listAccounts`. */
export interface AccountRow extends AccountSnapshot {
  userId: string;
}

export interface OpenReserve {
  generationId: string;
  userId: string;
  amount: number;
  createdAt: number;
}

/** Where a page of `openReserves` starts: after this reserve, in the order of the list. */
export type OpenReserveCursor = Pick<OpenReserve, 'createdAt' | 'generationId'>;

/** What a reserve is for, recorded with it for usage, and the key limit it must stay within. */
export interface ReserveOptions {
  modelId?: string;
  keyId?: string;
  /**
   * With `keyId`: the key's spend (held plus charged) in the window that starts at `windowStart` may reach at most
   * `amount` with this reserve. Which window applies is the caller's rule; the ledger only keeps it.
   */
  keyLimit?: { amount: number; windowStart: number };
  /**
   * The in-flight cap, kept by a ledger with `holdsInFlight` (ignored by one without): the user's open reserves (held,
   * neither settled nor released; a batch's count too), this one included, may be at most this many. The count is
   * kept on the user's account row and checked in the reserve's own atomic step, so racing reserves never pass it.
   * Every generation holds exactly one reserve from create until it finishes, so this is the count of the user's
   * unfinished generations that the store would otherwise count at insert (issue 36: one round trip less).
   */
  maxInFlight?: number;
  /**
   * With `keyId`: at most this many of the key's reserves open at once, counting this one (`limit_reached`
   * otherwise), in the same atomic step. Only reserves made with it count, and their settle frees the slot.
   */
  keyMaxInFlight?: number;
  /**
   * The windows an organisation's budget counts in. A ledger that keeps organisations reads the owner's organisation
   * in the reserve's own atomic step and holds it too: its in-flight count, and its budget's spend in the window of
   * its period (`organizationWindowStart`; `total` counts from 0). Which windows apply is the caller's rule.
   */
  windows?: BudgetWindows;
}

/** One reserve of a `reserveMany`. */
export interface ReserveItem {
  generationId: string;
  amount: number;
  modelId?: string;
}

export type UsageGroupBy = 'day' | 'model' | 'key';

export interface UsageQuery {
  /** First UTC day counted, `YYYY-MM-DD`. */
  from: string;
  /** Last UTC day counted (inclusive), `YYYY-MM-DD`. */
  to: string;
  groupBy: UsageGroupBy;
}

export interface UsageRow {
  /** `day`: the UTC day as `YYYY-MM-DD`; `model` / `key`: the id, or null for reserves made without one. */
  group: string | null;
  /** Settled reserves (finished generations, charged or not). */
  count: number;
  /** Tokens charged. */
  tokens: number;
}

export interface UsageReport {
  rows: UsageRow[];
  total: { count: number; tokens: number };
}

/**
 * Token billing.
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - `reserve` is atomic: under any number of concurrent calls (and processes) the balance never goes below
 *   zero; it either holds the whole amount or nothing. Calling it again for the same generationId returns
 *   `ok` without holding more.
 * - With `options.keyLimit`, the key's spend in that window is held in the same atomic step as the balance: however
 *   many reserves race, it never passes the limit, and a refused reserve holds nothing on either. The same for
 *   `options.keyMaxInFlight` and the key's open reserves (an answer of `limit_reached`).
 * - `settle(generationId, amount)` charges `amount` (clamped to the reserve) and returns the rest of the reserve
 *   to the balance and to the key's window it was held in; `release(generationId)` is `settle(generationId, 0)`, except
 *   that it counts nothing in usage (it undoes a create: no generation was made, as for a create refused after its
 *   reserve). Both
 *   are idempotent: a second call (a retry after a crash) changes nothing and returns the amount charged the first
 *   time. Settling an unknown generation returns null.
 * - `reserveMany` holds every item's reserve or none, in one atomic step: the balance (and, with `keyLimit`, the
 *   key's window) must cover their total. Each reserve is then settled on its own like any other. Called again with
 *   the same items (a retry) it answers `ok` without holding more; an id reserved for another user throws.
 * - For every user, `balance + reserved + settled` only changes through `credit`.
 * - Amounts are bounded by `MAX_TOKENS` (2^53 - 1, `domain/amounts.ts`): `credit` and `openAccount` throw a
 *   RangeError, changing nothing, for an amount that is negative, not finite or above it, and `credit` does the same,
 *   in its own atomic step, when the account's `balance + reserved` would pass it. So no balance ever becomes
 *   non-finite, however many credits race.
 * - `usage` counts settled reserves by the UTC day they settled (the `now` of settle), from a rollup kept in the
 *   settle's own step, so its cost follows the days, models and keys asked about, never the number of generations.
 * - Organisations (the optional `OrganizationLedger` methods; a ledger has all of them or none): a reserve of a
 *   member holds the organisation's in-flight count (one per reserve, at most `maxInFlight`) and its budget's window
 *   in the same atomic step as the balance and the key, and answers a `ReserveOutcome` naming the organisation; a
 *   refusal at any level holds nothing at any level. Settling gives back to the organisation the reserve was held
 *   under (even if its owner has left it since), and counts its spend in the organisation's usage.
 */
export interface Ledger extends Partial<OrganizationLedger>, Partial<UserLimitLedger> {
  /**
   * True when `reserve` keeps the user's in-flight count (`ReserveOptions.maxInFlight`): the service then caps creates
   * here, in the reserve, and inserts without counting. A ledger without it (a host's own) leaves the cap to the store.
   */
  readonly holdsInFlight?: boolean;
  reserve(userId: string, generationId: string, amount: number, now?: number, options?: ReserveOptions): Promise<ReserveResult | ReserveOutcome>;
  /** All of `items` or nothing (a batch); `options.modelId` is ignored (each item names its own). */
  reserveMany(userId: string, items: readonly ReserveItem[], now?: number, options?: ReserveOptions): Promise<ReserveResult | ReserveOutcome>;
  /** Returns the amount actually charged, or null when there is no reserve for that generation. */
  settle(generationId: string, amount: number, now?: number): Promise<number | null>;
  release(generationId: string, now?: number): Promise<number | null>;
  balance(userId: string): Promise<number>;
  /**
   * Adds tokens to a user's balance (creating the account). Amount must be from 0 to `MAX_TOKENS`, and the account's
   * balance plus reserved must stay within `MAX_TOKENS` (else a RangeError, nothing changed).
   */
  credit(userId: string, amount: number): Promise<void>;
  /**
   * Creates the account with `balance` when the user has none, atomically: true when it did, false (changing
   * nothing) when the account exists. Amount must be from 0 to `MAX_TOKENS`.
   */
  openAccount(userId: string, balance: number): Promise<boolean>;
  account(userId: string): Promise<AccountSnapshot>;
  /**
   * Reserves neither settled nor released, oldest first: by `createdAt`, then by `generationId` (for recovery, which
   * walks them all a page at a time). With `after` (the last of the previous page), only those after it in that order.
   */
  openReserves(limit: number, after?: OpenReserveCursor): Promise<OpenReserve[]>;
  /** A key's spend (held plus charged) in the window starting at `windowStart`. */
  keySpend(keyId: string, windowStart: number): Promise<number>;
  /** A user's settled spend on the days `from` to `to`, grouped. */
  usage(userId: string, query: UsageQuery): Promise<UsageReport>;
  /**
   * The accounts (every user the ledger holds, opened or credited), ordered by user id in the store's own order (one
   * that does not change), at most `limit`, after the user id `after` when given; for the operator console. Index-backed.
   * Optional: without it the admin API cannot list users (a host's own ledger may leave it out).
   */
  listAccounts?(limit: number, after?: string): Promise<AccountRow[]>;
}

/**
 * Organisations, kept by the ledger so that a reserve holds their limits in its own atomic step. A user belongs to at
 * most one. Removing a member changes nothing it holds: its open reserves settle against the organisation they were
 * held under.
 */
export interface OrganizationLedger {
  /** Creates it; false (changing nothing) when one with that id exists. */
  createOrganization(organization: OrganizationRecord): Promise<boolean>;
  /**
   * Replaces its limits (`budget`, `maxInFlight`, `weight`; an absent budget or cap is removed), keeping what it holds:
   * reserves made under the old limits settle as before. False (changing nothing) when there is no such organisation.
   */
  setOrganizationLimits(organizationId: string, limits: OrganizationLimits): Promise<boolean>;
  /** The organisation with its members and what it holds, or null. */
  organization(organizationId: string, windows: BudgetWindows): Promise<OrganizationState | null>;
  /**
   * Adds a user (or changes its role when it is a member already). `member_elsewhere`: it belongs to another
   * organisation (nothing changed); `no_organization`: there is no such organisation.
   */
  addMember(organizationId: string, member: OrganizationMember): Promise<'added' | 'no_organization' | 'member_elsewhere'>;
  /** False when the user is not a member of it. */
  removeMember(organizationId: string, userId: string): Promise<boolean>;
  /** The organisation a user belongs to, with its role, or null. */
  membership(userId: string): Promise<{ organizationId: string; role: OrganizationRole } | null>;
  /**
   * Settled spend of the reserves held under the organisation, by UTC day or by member (`group` is the user id),
   * from a rollup kept in the settle's own step.
   */
  organizationUsage(organizationId: string, query: OrganizationUsageQuery): Promise<UsageReport>;
}
