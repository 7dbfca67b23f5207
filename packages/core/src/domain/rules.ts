/**
 * Pure rules of a generation's life (no store, no I/O, no clock of their own: `now` is given): key budget windows,
 * the life a create may ask for, and expiry. Everyone asks them here: the Lifecycle, the use cases, reads, views,
 * file links and the sweep.
 */
import type { GenerationRecord } from './types.js';
import { DomainError } from './errors.js';
import type { KeyBudget } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';

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

/**
 * Checks the life a create (or a quote) asks for: an integer of seconds from 1 to `maxLifeSeconds`. Throws the 400
 * naming the field.
 */
export function checkLife(expiresAfterSeconds: number | undefined, retention: ResolvedServiceOptions['retention']): void {
  if (expiresAfterSeconds === undefined) return;
  const max = maxLifeSeconds(retention);
  if (Number.isInteger(expiresAfterSeconds) && expiresAfterSeconds >= 1 && expiresAfterSeconds <= max) return;
  const message =
    retention.finishedTtlMs === undefined
      ? `must be an integer from 1 to ${max}`
      : `must be an integer from 1 to ${max} (this service keeps finished generations for ${max} s)`;
  throw new DomainError('invalid_request', `expiresAfterSeconds ${message}.`, {
    details: [{ field: 'expiresAfterSeconds', code: 'invalid_value', message }],
  });
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
