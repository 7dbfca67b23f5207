import type { OrganizationUsageGroupBy, UsageGroupBy, UsageReport, UsageRow } from '../ports/ledger.js';

const DAY_MS = 86_400_000;

/** The UTC day index (days since the epoch) of an epoch-ms time: the unit the usage rollups are kept in. */
export function usageDayIndex(at: number): number {
  return Math.floor(at / DAY_MS);
}

/**
 * The longer rollups (issue 36): besides each day's cells, every ledger keeps the same cells (model and key) summed
 * over aligned spans of 8 and of 64 days (a span starts at a day index that is a multiple of its length). A report by
 * model or key over a long range then reads a few spans and at most 7 single days at each end, so its cost follows the
 * range's shape and the models and keys, not the number of generations or of days.
 */
export const USAGE_SPANS = [8, 64] as const;

/** Inclusive ranges of day indexes (single days) and of span starts, `[from, to]`; an empty range is `[1, 0]`. */
export interface UsageCover {
  /** Single days: before the first whole 8-day span, and after the last. */
  days: [[number, number], [number, number]];
  /** Starts of 8-day spans: before the first whole 64-day span, and after the last. */
  span8: [[number, number], [number, number]];
  /** Starts of 64-day spans. */
  span64: [number, number];
}

const EMPTY: [number, number] = [1, 0];

/** The days `from..to` (day indexes, inclusive) as whole aligned spans where they fit, single days at the ends. */
export function usageCover(from: number, to: number): UsageCover {
  const cover: UsageCover = { days: [EMPTY, EMPTY], span8: [EMPTY, EMPTY], span64: EMPTY };
  let d = from;
  const take = (len: number, until: (d: number) => boolean): [number, number] => {
    const first = d;
    while (d + len - 1 <= to && until(d)) d += len;
    return d > first ? [first, d - len] : EMPTY;
  };
  cover.days[0] = take(1, (x) => x % 8 !== 0);
  cover.span8[0] = take(8, (x) => x % 64 !== 0);
  cover.span64 = take(64, () => true);
  cover.span8[1] = take(8, () => true);
  cover.days[1] = take(1, () => true);
  return cover;
}

/** The day index of a `YYYY-MM-DD` date. */
export function dayIndexOf(isoDate: string): number {
  return Math.floor(Date.parse(`${isoDate}T00:00:00Z`) / DAY_MS);
}

/** The UTC day of a whole-day index (epoch ms / one day, as the SQL ledgers group by). */
export function usageDayOfIndex(dayIndex: number): string {
  return new Date(dayIndex * DAY_MS).toISOString().slice(0, 10);
}

/**
 * Adds rows up by group (rows of one group may come in parts) and orders them: days ascending, ids by tokens
 * spent (most first) then id, so every ledger answers the same report for the same data.
 */
export function groupUsage(rows: readonly UsageRow[], groupBy: UsageGroupBy | OrganizationUsageGroupBy): UsageReport {
  const by = new Map<string | null, UsageRow>();
  let count = 0;
  let tokens = 0;
  for (const r of rows) {
    const row = by.get(r.group);
    if (row) {
      row.count += r.count;
      row.tokens += r.tokens;
    } else {
      by.set(r.group, { group: r.group, count: r.count, tokens: r.tokens });
    }
    count += r.count;
    tokens += r.tokens;
  }
  const out = [...by.values()].sort(
    groupBy === 'day'
      ? (a, b) => (a.group! < b.group! ? -1 : 1)
      : (a, b) => b.tokens - a.tokens || (a.group === null ? 1 : b.group === null ? -1 : a.group < b.group ? -1 : a.group > b.group ? 1 : 0),
  );
  return { rows: out, total: { count, tokens } };
}

