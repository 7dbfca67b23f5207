import type { BudgetWindows, UserLimits, UserLimitState } from '../ports/ledger.js';
import { organizationWindowStart } from '../domain/limits.js';

/** What a reserve held on its owner's own limits, kept with the reserve so that its settle gives back to them. */
export interface UserHold {
  /** The budget window's start, when the user had a budget. */
  window: number | undefined;
}

interface Held {
  limits: UserLimits;
  inFlight: number;
  /** Held plus charged, by window start. */
  spent: Map<number, number>;
}

/**
 * The memory ledger's users' own limits and what they hold. Every method is one synchronous step, so the ledger's
 * reserve checks and holds them with every other level without yielding.
 */
export class MemoryUserLimits {
  private readonly users = new Map<string, Held>();

  /** True when some user has limits (an empty map costs the reserve of a host without them nothing). */
  get used(): boolean {
    return this.users.size > 0;
  }

  set(userId: string, limits: UserLimits): void {
    const held = this.users.get(userId);
    const copy: UserLimits = { ...(limits.budget ? { budget: { ...limits.budget } } : {}), ...(limits.maxInFlight !== undefined ? { maxInFlight: limits.maxInFlight } : {}) };
    if (held) held.limits = copy;
    else this.users.set(userId, { limits: copy, inFlight: 0, spent: new Map() });
  }

  /** The user's limits (a copy), or undefined when none were ever set. */
  of(userId: string): UserLimits | undefined {
    const held = this.users.get(userId);
    return held ? structuredClone(held.limits) : undefined;
  }

  state(userId: string, windows: BudgetWindows): UserLimitState | null {
    const held = this.users.get(userId);
    if (!held) return null;
    const budget = held.limits.budget;
    return {
      limits: structuredClone(held.limits),
      inFlight: held.inFlight,
      spent: budget ? (held.spent.get(organizationWindowStart(budget.period, windows)) ?? 0) : 0,
    };
  }

  /** Whether `count` more reserves of `amount` fit the user's cap and budget; changes nothing (`hold` does). */
  check(userId: string, count: number, amount: number, windows: BudgetWindows | undefined): 'limit_reached' | 'budget_exceeded' | UserHold | undefined {
    const held = this.users.get(userId);
    if (!held) return undefined;
    const { budget, maxInFlight } = held.limits;
    if (maxInFlight !== undefined && held.inFlight + count > maxInFlight) return 'limit_reached';
    let window: number | undefined;
    if (budget) {
      window = organizationWindowStart(budget.period, windows ?? { day: 0, month: 0 });
      if ((held.spent.get(window) ?? 0) + amount > budget.amount) return 'budget_exceeded';
    }
    return { window };
  }

  hold(userId: string, hold: UserHold, count: number, amount: number): void {
    const held = this.users.get(userId)!;
    held.inFlight += count;
    if (hold.window !== undefined) held.spent.set(hold.window, (held.spent.get(hold.window) ?? 0) + amount);
  }

  /** A settled reserve: its slot and unspent part given back. */
  settled(userId: string, hold: UserHold, reserved: number, charged: number): void {
    const held = this.users.get(userId);
    if (!held) return;
    held.inFlight -= 1;
    if (hold.window !== undefined) held.spent.set(hold.window, (held.spent.get(hold.window) ?? 0) - (reserved - charged));
  }
}
