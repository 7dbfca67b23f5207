import type { Settings } from '../domain/types.js';

/** The limits of one provider lane (a provider, or one account of it), over every instance of the service. */
export interface CapacityLimits {
  /** Requests in flight at once. */
  concurrency?: number;
  /** Requests started in any 60 s. */
  requestsPerMinute?: number;
  /** Units (what `ProviderCapacity.units` counts: tokens, seconds of video, images...) started in any 60 s. */
  unitsPerMinute?: number;
}

/**
 * What a provider declares about its upstream's limits (`provider.capacity`). Every model of the provider shares
 * the lane; two provider objects (or two services) naming the same `lane` share its limits, so one upstream account
 * used by many providers or instances is held to one set of limits.
 */
export interface ProviderCapacity extends CapacityLimits {
  /** The lane's name, the same on every instance: `replicate`, `replicate:acme` (one account). Letters, digits, `._:-`. */
  lane: string;
  /** The units one request of a generation uses, from its validated settings. Default 1. */
  units?: (settings: Settings) => number;
}

/** One ask for the lane. */
export interface CapacityAsk {
  /** Who holds the concurrency slot (the runner uses the generation id): asking again with it takes no second slot. */
  permitId: string;
  /** Units this request uses (counted against `unitsPerMinute`). */
  units: number;
  /** The time of the ask (the service's clock). */
  now: number;
  /** The slot is given back by itself after this long (a holder that crashed never releases it). */
  holdMs: number;
  /**
   * The ask's place in the lane's fair share across tenants (`domain/lane-turns.ts`): the runner's admission of a
   * job gives it, so the lane's free slots go to tenants by weight over every instance. Absent (a run's further
   * requests, a `low` job's spare capacity): the limits alone decide, as before.
   */
  fair?: CapacityFairness;
}

/** Who asks, for the lane's fair share: the tenant, its weight, and the waiting job. */
export interface CapacityFairness {
  /** The tenant whose share it counts in: `o:<organizationId>`, or `u:<ownerId>` for a user of no organisation. */
  tenant: string;
  /** The tenant's weight (`fairWeight`: a positive number, 1 when absent). */
  weight: number;
  /** The waiting job (the generation id): one waiter however often it asks. */
  waiter: string;
}

/** The answer to an ask: granted, or refused with when it is worth asking again (absent: when a slot is released). */
export type CapacityGrant = { granted: true } | { granted: false; retryAfterMs?: number };

/**
 * Shared counters of provider lanes: slots in flight, requests and units started in the last minute, and a pause
 * (an upstream's 429 `Retry-After`). Every instance of a service asks the same one, so the limits hold across them
 * (memory in one process, the SQLite or Postgres store's tables, or Redis).
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - `acquire` decides and records atomically (one transaction, one script, or one synchronous step): of racing asks
 *   no more are granted than the limits allow. It refuses while the lane is paused (`retryAfterMs`: until the pause
 *   ends); when `concurrency` slots that have not expired (`holdMs`) are held by other permit ids (no
 *   `retryAfterMs`); when `requestsPerMinute` requests were granted in the 60 s before `now` (that is, at a time `t`
 *   with `now - t < 60 000`; `retryAfterMs`: until the oldest of them leaves the window); when `unitsPerMinute` would
 *   be exceeded by `units` (unless no units were granted in the window: a request larger than the limit runs alone).
 *   A grant holds (or renews) `permitId`'s slot until `now + holdMs` and records one request of `units` at `now`.
 * - `release(lane, permitId)` frees the slot (idempotent). With `refund: { at }`, the request that permit recorded at
 *   `at` is taken back too (it was never sent upstream).
 * - `pause(lane, until)` refuses every ask before `until` (a later pause extends it, an earlier one never shortens it).
 * - A lane without limits never refuses. Lanes are independent.
 * - An ask with `fair` is also held to the lane's turns (`laneTurn` in domain/lane-turns.ts), decided in the same
 *   atomic step: with room, it is granted only when no other tenant with a live waiter has a lower virtual time, and
 *   refused otherwise (no `retryAfterMs`); a refused ask (for the limits or a turn) keeps its waiter live until
 *   `waiterUntil(now, retryAfterMs)`; a grant drops the waiter and adds `laneTurnCost(weight)` to its tenant's time.
 *   A refund gives that turn back as well.
 */
export interface CapacityStore {
  acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant>;
  release(lane: string, permitId: string, refund?: { at: number }): Promise<void>;
  pause(lane: string, until: number): Promise<void>;
}

/** The window `requestsPerMinute` and `unitsPerMinute` count in. */
export const CAPACITY_WINDOW_MS = 60_000;
