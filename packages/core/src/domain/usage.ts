import type { OrganizationUsageGroupBy, UsageGroupBy, UsageReport, UsageRow } from '../ports/ledger.js';

const DAY_MS = 86_400_000;

/** The UTC day index (days since the epoch) of an epoch-ms time: the unit the usage rollups are kept in. */
export function usageDayIndex(at: number): number {
  return Math.floor(at / DAY_MS);
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

