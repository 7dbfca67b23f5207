import type { Clock, ClockTimer } from '@genservice/core/ports';

interface Timer extends ClockTimer {
  at: number;
  every?: number;
  callback: () => void;
  seq: number;
}

/**
 * A clock a test owns: time moves only when the test says so. Pass it as the service's `clock` option (and to the
 * in-memory ports a test builds itself), then `await clock.advance(ms)` runs every timer that falls due, in time
 * order, letting the promises each one starts settle before the next. Lease expiry, retries, progress intervals,
 * budget windows and webhook schedules are then tested without sleeping.
 *
 * @example
 * const clock = new FakeClock(Date.UTC(2026, 0, 31, 23, 59));
 * const service = createGenerationService({ providers, clock });
 * await clock.advance(60_000); // into February: a new month's budget window
 */
export class FakeClock implements Clock {
  private current: number;
  private readonly timers = new Set<Timer>();
  private seq = 0;

  /** Starts at `start` (epoch ms); default a fixed instant, 2026-01-01T00:00:00Z, so tests do not depend on today. */
  constructor(start: number = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(callback: () => void, ms: number): ClockTimer {
    const t: Timer = { at: this.current + Math.max(0, ms), callback, seq: this.seq++ };
    this.timers.add(t);
    return t;
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    if (timer) this.timers.delete(timer as Timer);
  }

  setInterval(callback: () => void, ms: number): ClockTimer {
    const every = Math.max(1, ms);
    const t: Timer = { at: this.current + every, every, callback, seq: this.seq++ };
    this.timers.add(t);
    return t;
  }

  clearInterval(timer: ClockTimer | undefined): void {
    this.clearTimeout(timer);
  }

  /** How many timers are waiting (a test can check that something is scheduled, or that nothing leaked). */
  get pending(): number {
    return this.timers.size;
  }

  /**
   * Moves time forward by `ms`, running each timer due on the way at its own time, in order; between timers (and at
   * the end) pending promise callbacks and I/O callbacks get to run, so work a timer starts can finish and schedule more.
   */
  async advance(ms: number): Promise<void> {
    const end = this.current + Math.max(0, ms);
    for (;;) {
      await settle();
      const next = this.nextDue(end);
      if (!next) break;
      this.current = Math.max(this.current, next.at);
      if (next.every !== undefined) next.at += next.every;
      else this.timers.delete(next);
      next.callback();
    }
    this.current = end;
    await settle();
  }

  /** Moves time to `epochMs` (never backwards), running the timers due on the way. */
  async advanceTo(epochMs: number): Promise<void> {
    await this.advance(Math.max(0, epochMs - this.current));
  }

  private nextDue(end: number): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.timers) {
      if (t.at > end) continue;
      if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/** Lets queued promise callbacks and already-arrived I/O callbacks run (a macrotask turn, a few times over). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
