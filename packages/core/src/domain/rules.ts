/**
 * The Lifecycle's pure rules (no store, no I/O): batch size, key budget windows and expiry. They live beside
 * lifecycle.ts, which re-exports them, so that views and reads can ask them without importing the Lifecycle class
 * (and through it the webhook sender, which imports the views).
 */
import type { GenerationRecord } from './types.js';
import type { KeyBudget } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';

/** The most requests one batch may hold. */
export const MAX_BATCH_SIZE = 1000;

/**
 * The budget window a key's spend counts in at `now`: the UTC day or UTC month it falls in. The one rule for key
 * budgets; the ledger only keeps the spend of the window it is given.
 */
export function budgetWindow(period: KeyBudget['period'], now: number): { start: number; end: number } {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  if (period === 'month') return { start: Date.UTC(y, m, 1), end: Date.UTC(y, m + 1, 1) };
  const start = Date.UTC(y, m, d.getUTCDate());
  return { start, end: Date.UTC(y, m, d.getUTCDate() + 1) };
}

/** The longest life a create may ask for without retention: the largest 32-bit integer of seconds (about 68 years). */
export const MAX_LIFE_SECONDS = 2_147_483_647;

/**
 * The longest `expiresAfterSeconds` a create may ask for: the service's retention (in whole seconds), or
 * `MAX_LIFE_SECONDS` when the service keeps generations forever (the asked life is then their only limit).
 */
export function maxLifeSeconds(retention: ResolvedServiceOptions['retention']): number {
  const ttl = retention.finishedTtlMs;
  return ttl === undefined ? MAX_LIFE_SECONDS : Math.max(1, Math.min(MAX_LIFE_SECONDS, Math.floor(ttl / 1000)));
}

/** When a generation's own life ends if it finishes at `finishedAt`; undefined when it asked for none. */
export function lifeEnd(expiresAfterSeconds: number | undefined, finishedAt: number): number | undefined {
  return expiresAfterSeconds === undefined ? undefined : finishedAt + expiresAfterSeconds * 1000;
}

/**
 * When a generation expires (epoch ms): the earlier of the service's retention (`finishedTtlMs` after it finished)
 * and the life its owner asked for at create (`expiresAfterSeconds` after it finished). Undefined while it runs, or
 * when neither applies. At that instant it reads exactly like a deleted one, and the sweep deletes it. The one
 * expiry rule: reads, views, file links and the sweep all ask it.
 */
export function expiresAt(rec: Pick<GenerationRecord, 'finishedAt' | 'expiresAfterSeconds'>, ttlMs: number | undefined): number | undefined {
  if (rec.finishedAt === undefined) return undefined;
  const own = lifeEnd(rec.expiresAfterSeconds, rec.finishedAt);
  const service = ttlMs === undefined ? undefined : rec.finishedAt + ttlMs;
  if (own === undefined) return service;
  return service === undefined ? own : Math.min(own, service);
}

/** Whether a generation has expired at `now` (see `expiresAt`). */
export function hasExpired(rec: Pick<GenerationRecord, 'finishedAt' | 'expiresAfterSeconds'>, ttlMs: number | undefined, now: number): boolean {
  const at = expiresAt(rec, ttlMs);
  return at !== undefined && at <= now;
}

