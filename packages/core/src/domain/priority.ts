/**
 * Priority of a create (`priority: 'low' | 'normal' | 'high'`): what each costs (a multiplier of the model's price),
 * which keys may ask it, and the deadline a `low` one may carry. The one place these rules live: admission asks them
 * at create and quote, the Lifecycle at claim and recovery (a missed deadline fails free: domain/fees.ts).
 */
import { DomainError } from './errors.js';
import type { CapacityLimits } from '../ports/capacity.js';
import type { Clock } from '../ports/clock.js';

export const PRIORITIES = ['low', 'normal', 'high'] as const;
export type Priority = (typeof PRIORITIES)[number];

/**
 * A provider lane's limits as a `low` generation may use them: spare capacity only. It never takes the last slot (of
 * two or more), nor the last tenth of the minute's requests or units, so `normal` and `high` work always finds room.
 */
export function spareLimits(limits: CapacityLimits): CapacityLimits {
  const { concurrency, requestsPerMinute, unitsPerMinute } = limits;
  return {
    ...(concurrency !== undefined ? { concurrency: Math.max(1, concurrency - 1) } : {}),
    ...(requestsPerMinute !== undefined ? { requestsPerMinute: Math.max(1, requestsPerMinute - Math.max(1, Math.floor(requestsPerMinute / 10))) } : {}),
    ...(unitsPerMinute !== undefined ? { unitsPerMinute: unitsPerMinute * 0.9 } : {}),
  };
}

/** The key scope a key needs to ask a priority the host restricts (`priority.scoped`). */
export const PRIORITY_SCOPE = 'priority' as const;

/** The longest a `deadline` may lie ahead: 30 days. */
export const MAX_DEADLINE_MS = 30 * 24 * 3600 * 1000;

/** The service's priority settings, resolved. */
export interface PriorityRules {
  /** Price multiplier of each priority, unless a model sets its own. */
  multipliers: Record<Priority, number>;
  /** Priorities only keys with the `priority` scope may ask. */
  scoped: readonly Priority[];
}

export const DEFAULT_PRIORITY_MULTIPLIERS: Readonly<Record<Priority, number>> = Object.freeze({ low: 1, normal: 1, high: 1 });

/** The multiplier of `priority` for a model: the model's own (`definition.priorityMultipliers`), else the service's. */
export function priorityMultiplier(priority: Priority, rules: PriorityRules, own?: Partial<Record<Priority, number>>): number {
  return own?.[priority] ?? rules.multipliers[priority];
}

/** The price a create reserves at `priority`: the model's price times the multiplier. */
export function priorityPrice(basePrice: number, multiplier: number): number {
  return basePrice * multiplier;
}

/**
 * Checks a create's `priority` and `deadline` (an ISO 8601 instant) at `clock.now()`: a deadline only with `low`, in the
 * future, at most `MAX_DEADLINE_MS` ahead; a scoped priority only for a key with the `priority` scope (a key of the
 * host's own resolver carries no scopes and may ask any). Answers the deadline as epoch ms. Throws the 400 naming the
 * field, or the 403.
 */
export function checkPriority(
  priority: Priority,
  deadline: string | undefined,
  rules: PriorityRules,
  scopes: readonly string[] | undefined,
  clock: Pick<Clock, 'now'>,
): number | undefined {
  if (rules.scoped.includes(priority) && scopes !== undefined && !scopes.includes(PRIORITY_SCOPE)) {
    throw new DomainError('forbidden', `This key may not ask priority "${priority}": it needs the "${PRIORITY_SCOPE}" scope.`);
  }
  if (deadline === undefined) return undefined;
  const bad = (message: string): DomainError =>
    new DomainError('invalid_request', `deadline ${message}.`, { details: [{ field: 'deadline', code: 'invalid_value', message }] });
  if (priority !== 'low') throw bad('is only for priority "low"');
  const at = Date.parse(deadline);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(deadline) || !Number.isFinite(at)) throw bad('must be an ISO 8601 date and time');
  // The clock is read only for a deadline: most creates ask none (issue 36).
  const now = clock.now();
  if (at <= now) throw bad('must be in the future');
  if (at - now > MAX_DEADLINE_MS) throw bad('must be at most 30 days ahead');
  return at;
}
