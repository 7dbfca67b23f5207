/** How the delay between polls grows. All values in milliseconds. */
export interface PollSchedule {
  /** Delay before the first poll of a new generation, and between the first polls. */
  initialMs: number;
  /** Delays never grow past this. */
  maxMs: number;
  /** Each delay is the previous one times this. */
  factor: number;
}

export interface PollScheduleOverrides {
  pollIntervalMs?: number;
  maxPollIntervalMs?: number;
}

/** Used when the model (and so its estimate) is unknown: a generation id alone does not say which model made it. */
const UNKNOWN_ESTIMATE_INITIAL_MS = 1_000;
const UNKNOWN_ESTIMATE_MAX_MS = 5_000;

const clamp = (value: number, min: number, max: number): number => Math.min(max, Math.max(min, value));

/**
 * The schedule for a model that takes about `estimatedSeconds`.
 *
 * The first poll comes at half the estimate: a generation is rarely done much sooner, and polling a fast model
 * (estimate 0.05 s) no faster than every 100 ms keeps load on the server bounded. Later delays grow by 1.5x up
 * to the estimate itself, held between 2 s (so a long job that overran a tiny estimate is not polled forever at
 * 100 ms) and 15 s (so a long job is noticed soon after it ends).
 */
export function pollSchedule(
  estimatedSeconds: number | undefined,
  overrides: PollScheduleOverrides = {},
): PollSchedule {
  const known = typeof estimatedSeconds === 'number' && Number.isFinite(estimatedSeconds) && estimatedSeconds >= 0;
  const estimateMs = known ? estimatedSeconds * 1000 : undefined;
  const initialMs =
    overrides.pollIntervalMs ??
    (estimateMs === undefined ? UNKNOWN_ESTIMATE_INITIAL_MS : clamp(estimateMs / 2, 100, 5_000));
  const maxMs =
    overrides.maxPollIntervalMs ?? (estimateMs === undefined ? UNKNOWN_ESTIMATE_MAX_MS : clamp(estimateMs, 2_000, 15_000));
  return { initialMs, maxMs: Math.max(maxMs, initialMs), factor: 1.5 };
}

/** Yields the successive delays of a schedule. */
export class Backoff {
  private current: number;

  constructor(private readonly schedule: PollSchedule) {
    this.current = schedule.initialMs;
  }

  next(): number {
    const delay = this.current;
    this.current = Math.min(this.schedule.maxMs, this.current * this.schedule.factor);
    return Math.round(delay);
  }
}
