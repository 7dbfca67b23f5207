/**
 * The nested limits of a create (pure rules, `now` is given): the balance (the user's), the user's own budget and
 * in-flight cap, the key's budget and cap, and the organisation's budget and in-flight cap. The Lifecycle hands the windows to the ledger, which holds every level
 * in one atomic step, and turns a refusal into the caller's answer here.
 */
import { DomainError } from './errors.js';
import { budgetWindow } from './rules.js';
import type { KeyBudget } from '../ports/api-keys.js';
import type { BudgetWindows, OrganizationBudget, OrganizationRecord, ReserveOutcome, ReserveResult } from '../ports/ledger.js';

/** The largest organisation weight (its share of the runner): plan tiers are small integers. */
export const MAX_ORGANIZATION_WEIGHT = 1000;

/** The windows a budget counts in at `now`: the UTC day and the UTC month (`budgetWindow`'s starts). */
export function budgetWindows(now: number): BudgetWindows {
  // Every reserve asks (issue 36): the day's answer is kept, and made again only once `now` leaves that day.
  const last = lastWindows;
  if (last !== undefined && now >= last.from && now < last.to) return last.windows;
  const day = budgetWindow('day', now);
  const windows: BudgetWindows = Object.freeze({ day: day.start, month: budgetWindow('month', now).start });
  lastWindows = { from: day.start, to: day.end, windows };
  return windows;
}

let lastWindows: { from: number; to: number; windows: BudgetWindows } | undefined;

/** The start of the window an organisation's budget of `period` counts in: its day, its month, or 0 for `total`. */
export function organizationWindowStart(period: OrganizationBudget['period'], windows: BudgetWindows): number {
  return period === 'total' ? 0 : period === 'month' ? windows.month : windows.day;
}

/** A ledger's answer as an outcome (a plain result from a ledger without organisations: a key's budget refused). */
export function reserveOutcome(answer: ReserveResult | ReserveOutcome): ReserveOutcome {
  if (typeof answer === 'string') {
    // Without an organisation only the user (its balance or in-flight cap) and the key can refuse.
    return answer === 'ok' ? { result: 'ok' } : { result: answer, refusedBy: answer === 'insufficient' || answer === 'in_flight_limit' ? 'user' : 'key' };
  }
  return answer;
}

const PERIOD_WORD = { day: 'daily', month: 'monthly', total: 'total' } as const;
/** Who a refusal names: the level that refused (`user` is the user's own budget or cap; its balance is answered apart). */
const WHOSE = { key: 'This key', user: 'Your user account', organization: 'Your organisation' } as const;

/**
 * The answer to a refused reserve: 402 `insufficient_funds` (the balance), 402 `budget_exceeded` (the user's, the
 * key's or the organisation's budget, with when it resets), 429 `rate_limited` (the user's, the key's or the
 * organisation's in-flight cap).
 * Null for `ok`.
 */
export function reserveRefusal(
  outcome: ReserveOutcome,
  context: { key?: KeyBudget; keyMaxInFlight?: number; userMaxInFlight?: number; now: number; priced: string; what: string; retryAfterSeconds: number },
): DomainError | null {
  const { now, priced, what } = context;
  if (outcome.result === 'ok') return null;
  if (outcome.result === 'insufficient') return new DomainError('insufficient_funds', `The balance is too low for this ${what} (${priced}).`);
  if (outcome.result === 'in_flight_limit') {
    // The user's own cap (`ReserveOptions.maxInFlight`), held by a ledger with `holdsInFlight`.
    const cap = context.userMaxInFlight;
    return new DomainError('rate_limited', `You have ${cap ?? 'your limit of'} ${cap === 1 ? 'generation' : 'generations'} pending or processing; wait for one to finish.`, {
      retryAfterSeconds: context.retryAfterSeconds,
    });
  }
  const org: OrganizationRecord | undefined = outcome.organization;
  const by = outcome.refusedBy ?? 'key';
  if (outcome.result === 'limit_reached') {
    const cap = by === 'key' ? context.keyMaxInFlight : by === 'user' ? outcome.userLimits?.maxInFlight : org?.maxInFlight;
    return new DomainError(
      'rate_limited',
      `${WHOSE[by]} has ${cap ?? 'its limit of'} ${cap === 1 ? 'generation' : 'generations'} pending or processing; wait for one to finish.`,
      { retryAfterSeconds: context.retryAfterSeconds },
    );
  }
  const budget: OrganizationBudget | undefined = by === 'organization' ? org?.budget : by === 'user' ? outcome.userLimits?.budget : context.key;
  const whose = WHOSE[by];
  if (!budget) return new DomainError('budget_exceeded', `${whose}'s budget would be exceeded (${priced}).`);
  const resets = budget.period === 'total' ? '' : `; it resets at ${new Date(budgetWindow(budget.period, now).end).toISOString()}`;
  return new DomainError('budget_exceeded', `${whose}'s ${PERIOD_WORD[budget.period]} budget of ${budget.amount} tokens would be exceeded (${priced})${resets}.`);
}
