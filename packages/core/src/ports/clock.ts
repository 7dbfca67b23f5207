/** A timer a clock started: `unref` (where the clock has it) lets the process exit while it waits. */
export interface ClockTimer {
  unref?(): unknown;
}

/**
 * Where the service reads the time and waits. Every reading of the time in core and every timer it starts goes
 * through the service's one clock, so a test moves a clock it owns (or vitest's fake timers, which the default clock
 * follows) instead of sleeping. A host passes its own through `options.clock` only to control time in its tests.
 *
 * Guarantees a clock must give: `now()` is milliseconds since the epoch and never goes backwards within a process;
 * a timer's callback runs once (`setTimeout`) or every `ms` (`setInterval`), never before `now()` reached its time,
 * and never after it was cleared.
 */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer | undefined): void;
  setInterval(callback: () => void, ms: number): ClockTimer;
  clearInterval(timer: ClockTimer | undefined): void;
}
