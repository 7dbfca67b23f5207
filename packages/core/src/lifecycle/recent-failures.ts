import { injectable } from 'tsyringe';

const MINUTE_MS = 60_000;
/** How far back it keeps counts: the queue-health view asks for the last hour. */
const KEEP_MINUTES = 60;

/**
 * Generations this instance saw fail, counted in one-minute buckets over the last hour (what the admin queue-health
 * view reports). Per instance: several instances each count their own (the view says so). Memory is bounded by the
 * number of buckets, never by the number of failures.
 */
@injectable()
export class RecentFailures {
  private readonly buckets = new Map<number, number>();

  record(now: number): void {
    const minute = Math.floor(now / MINUTE_MS);
    this.buckets.set(minute, (this.buckets.get(minute) ?? 0) + 1);
    for (const m of this.buckets.keys()) if (m <= minute - KEEP_MINUTES) this.buckets.delete(m);
  }

  /** Failures in the minute buckets of the last hour up to `now` (to the minute). */
  lastHour(now: number): number {
    const minute = Math.floor(now / MINUTE_MS);
    let sum = 0;
    for (const [m, n] of this.buckets) if (m > minute - KEEP_MINUTES && m <= minute) sum += n;
    return sum;
  }
}
