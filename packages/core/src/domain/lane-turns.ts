/**
 * Whose turn a provider lane's next free slot is, over every instance that shares the lane: the rule a
 * `CapacityStore` applies to asks that carry `fair` (the runner's admissions). Written once here; the memory and
 * SQLite stores call `laneTurn`, the Postgres store's `capacity_acquire` function (migrations 17, 18) and the Redis
 * store's Lua script mirror it step for step, and the shared contract suite checks all four alike.
 *
 * Each lane keeps, per tenant (an organisation, or a user of none), a virtual time, and a set of live waiters (an
 * ask that was refused: waiter id -> tenant, live until `waiterUntil`). With room in the lane, an ask is granted only
 * when its tenant's virtual time is the lowest among the tenants with a live waiter (ties: whoever asks first); a
 * grant adds `laneTurnCost(weight)` to it. So with every tenant waiting, the lane's grants follow the weights
 * whichever instance asks, and a tenant that just arrived gets the next free slot behind at most one grant of each
 * other tenant. A tenant without a live waiter banks no credit: when it asks again it starts no lower than the
 * lane's floor (the lowest virtual time of the tenants asking, as last seen). A waiter that stops asking (its
 * instance crashed) holds its tenant's turn only until `waiterUntil`: the most a lane's free slot waits for it.
 */
import { fairWeight } from './fair-order.js';

/** Virtual time one grant costs a tenant of weight 1 (integers, so every store computes the same numbers). */
export const LANE_TURN_UNITS = 1_000_000;

/**
 * How long after the time a refused ask was told to come back (its `retryAfterMs`, or at once without one) its
 * waiter still holds its tenant's turn. A few of the runner's polls (`CAPACITY_POLL_MS`, 1 s): long enough for a job
 * to ask again through a busy queue, short enough that a crashed instance's waiters leave a free slot idle briefly.
 */
export const LANE_WAITER_TTL_MS = 5000;

/** Virtual time one grant costs a tenant of `weight` (`fairWeight` of it: 1 when absent or invalid). */
export function laneTurnCost(weight: unknown): number {
  return Math.max(1, Math.round(LANE_TURN_UNITS / fairWeight(weight)));
}

/** Until when a refused ask's waiter holds its tenant's turn. */
export function waiterUntil(now: number, retryAfterMs: number | undefined): number {
  return now + (retryAfterMs ?? 0) + LANE_WAITER_TTL_MS;
}

/** What the rule reads of a lane, after its expired waiters are dropped (each store keeps it its own way). */
export interface LaneTurnView {
  /** The lane's floor: the lowest virtual time of the tenants asking (the asker and the live ones) when last seen; 0 at first. */
  floor: number;
  /** The asking tenant's virtual time; undefined when the lane has none (never seen, or forgotten at the floor). */
  vt: number | undefined;
  /** Whether the asking tenant has a live waiter (another ask of it, or this one from before). */
  live: boolean;
  /** The lowest virtual time among the other tenants with a live waiter; undefined when none. */
  lowestOther: number | undefined;
}

/** The rule's answer: the lane's new floor, the asking tenant's virtual time before any grant, and whether it is owed. */
export interface LaneTurn {
  floor: number;
  vt: number;
  owed: boolean;
}

/**
 * Whose turn it is. A tenant that was not live starts no lower than the floor; it is owed the free slot when no other
 * live tenant is lower; and the floor rises to the lowest of the asking tenant's and the other live tenants' times
 * (the asker is active, granted or not), so it follows the lowest time of the tenants asking. The store then
 * records a refused ask's waiter (until `waiterUntil`), or on a grant drops the waiter and adds
 * `laneTurnCost(weight)` to the tenant's virtual time. A tenant with no live waiter at or below the floor may be
 * forgotten (it would start there anyway).
 */
export function laneTurn(view: LaneTurnView): LaneTurn {
  const vt = view.live && view.vt !== undefined ? view.vt : Math.max(view.vt ?? view.floor, view.floor);
  const lowest = view.lowestOther === undefined ? vt : Math.min(vt, view.lowestOther);
  return { floor: Math.max(view.floor, lowest), vt, owed: view.lowestOther === undefined || vt <= view.lowestOther };
}
