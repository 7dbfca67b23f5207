import { laneTurn, laneTurnCost, waiterUntil } from '../domain/lane-turns.js';
import { CAPACITY_WINDOW_MS, type CapacityAsk, type CapacityFairness, type CapacityGrant, type CapacityLimits, type CapacityStore } from '../ports/capacity.js';

interface LaneState {
  /** permitId -> when its slot expires. */
  permits: Map<string, number>;
  /** Requests granted, oldest first (a fair grant's tenant and cost, so a refund gives the turn back). */
  requests: Array<{ at: number; units: number; permitId: string; tenant?: string; cost?: number }>;
  pausedUntil: number;
  turns: LaneTurns;
}

/** A lane's turns (domain/lane-turns.ts): tenants' virtual times and live waiters. */
interface LaneTurns {
  floor: number;
  /** Tenant -> virtual time (absent: at the floor). */
  vt: Map<string, number>;
  /** Waiter -> its tenant and until when it is live. */
  waiters: Map<string, { tenant: string; until: number }>;
  /** Tenant -> its live waiters (absent: none). */
  live: Map<string, number>;
  /** No waiter expires before this (a scan finds those that do). */
  nextExpiry: number;
}

/**
 * Provider lanes' counters in this process (the default): exact for one instance; instances that share an upstream
 * account share a store's or Redis's counters instead (`createSqliteStores().capacity`, `PostgresCapacityStore`,
 * `RedisCapacityStore`).
 */
export class MemoryCapacityStore implements CapacityStore {
  private readonly lanes = new Map<string, LaneState>();

  private lane(name: string): LaneState {
    let s = this.lanes.get(name);
    if (!s) {
      s = {
        permits: new Map(),
        requests: [],
        pausedUntil: 0,
        turns: { floor: 0, vt: new Map(), waiters: new Map(), live: new Map(), nextExpiry: Number.POSITIVE_INFINITY },
      };
      this.lanes.set(name, s);
    }
    return s;
  }

  async acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant> {
    const s = this.lane(lane);
    const refusal = this.limitsRefuse(s, limits, ask);
    let paid: { tenant: string; cost: number } | undefined;
    if (ask.fair) {
      const decided = this.turn(s.turns, ask.fair, ask.now, refusal);
      if (!decided.granted) return decided;
      paid = decided.paid;
    } else if (refusal) return refusal;
    s.permits.set(ask.permitId, ask.now + ask.holdMs);
    s.requests.push({ at: ask.now, units: ask.units, permitId: ask.permitId, ...paid });
    return { granted: true };
  }

  /** The refusal the lane's pause and limits give this ask, or undefined when it has room. */
  private limitsRefuse(s: LaneState, limits: CapacityLimits, ask: CapacityAsk): CapacityGrant | undefined {
    const { now } = ask;
    if (s.pausedUntil > now) return { granted: false, retryAfterMs: s.pausedUntil - now };
    for (const [id, until] of s.permits) if (until <= now) s.permits.delete(id);
    if (limits.concurrency !== undefined && !s.permits.has(ask.permitId) && s.permits.size >= limits.concurrency) return { granted: false };
    while (s.requests.length > 0 && now - s.requests[0]!.at >= CAPACITY_WINDOW_MS) s.requests.shift();
    const oldest = s.requests[0];
    const wait = oldest ? oldest.at + CAPACITY_WINDOW_MS - now : 0;
    if (limits.requestsPerMinute !== undefined && s.requests.length >= limits.requestsPerMinute) return { granted: false, retryAfterMs: wait };
    if (limits.unitsPerMinute !== undefined) {
      const used = s.requests.reduce((sum, r) => sum + r.units, 0);
      if (used > 0 && used + ask.units > limits.unitsPerMinute) return { granted: false, retryAfterMs: wait };
    }
    return undefined;
  }

  /** The lane's turns for a fair ask (laneTurn): a refusal that keeps its waiter, or a grant that pays its turn. */
  private turn(t: LaneTurns, fair: CapacityFairness, now: number, refusal: CapacityGrant | undefined): { granted: false; retryAfterMs?: number } | { granted: true; paid: { tenant: string; cost: number } } {
    this.expire(t, now);
    let lowestOther: number | undefined;
    for (const tenant of t.live.keys()) {
      if (tenant === fair.tenant) continue;
      const v = t.vt.get(tenant) ?? t.floor;
      if (lowestOther === undefined || v < lowestOther) lowestOther = v;
    }
    const decided = laneTurn({ floor: t.floor, vt: t.vt.get(fair.tenant), live: t.live.has(fair.tenant), lowestOther });
    if (decided.floor > t.floor) {
      t.floor = decided.floor;
      for (const [tenant, v] of t.vt) if (v <= t.floor && !t.live.has(tenant)) t.vt.delete(tenant);
    }
    t.vt.set(fair.tenant, decided.vt);
    const refused: CapacityGrant | undefined = refusal ?? (decided.owed ? undefined : { granted: false });
    if (refused && !refused.granted) {
      this.unwait(t, fair.waiter);
      const until = waiterUntil(now, refused.retryAfterMs);
      t.waiters.set(fair.waiter, { tenant: fair.tenant, until });
      t.live.set(fair.tenant, (t.live.get(fair.tenant) ?? 0) + 1);
      t.nextExpiry = Math.min(t.nextExpiry, until);
      return refused;
    }
    this.unwait(t, fair.waiter);
    const cost = laneTurnCost(fair.weight);
    t.vt.set(fair.tenant, decided.vt + cost);
    return { granted: true, paid: { tenant: fair.tenant, cost } };
  }

  /** Drops the waiters no longer live (a scan, only once the earliest of them is due). */
  private expire(t: LaneTurns, now: number): void {
    if (t.nextExpiry > now) return;
    let next = Number.POSITIVE_INFINITY;
    for (const [waiter, w] of t.waiters) {
      if (w.until <= now) this.unwait(t, waiter);
      else next = Math.min(next, w.until);
    }
    t.nextExpiry = next;
  }

  private unwait(t: LaneTurns, waiter: string): void {
    const w = t.waiters.get(waiter);
    if (!w) return;
    t.waiters.delete(waiter);
    const n = (t.live.get(w.tenant) ?? 1) - 1;
    if (n > 0) t.live.set(w.tenant, n);
    else t.live.delete(w.tenant);
  }

  async release(lane: string, permitId: string, refund?: { at: number }): Promise<void> {
    const s = this.lanes.get(lane);
    if (!s) return;
    s.permits.delete(permitId);
    if (refund) {
      const i = s.requests.findIndex((r) => r.permitId === permitId && r.at === refund.at);
      if (i >= 0) {
        const [r] = s.requests.splice(i, 1);
        // The turn was never used either: its tenant's virtual time goes back (unless it was forgotten at the floor).
        if (r?.tenant !== undefined && r.cost !== undefined) {
          const v = s.turns.vt.get(r.tenant);
          if (v !== undefined) s.turns.vt.set(r.tenant, v - r.cost);
        }
      }
    }
  }

  async pause(lane: string, until: number): Promise<void> {
    const s = this.lane(lane);
    s.pausedUntil = Math.max(s.pausedUntil, until);
  }
}
