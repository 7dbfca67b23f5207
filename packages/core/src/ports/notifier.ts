/**
 * Wakes readers of the event log on every instance when any instance appended to it. It carries no data: the log is
 * the truth, a wake-up only says "read it now" (a missed one costs latency, never an event).
 *
 * Guarantees: after `start(onWake)` resolves, a `publish()` on any instance sharing the channel leads to `onWake` on
 * this one soon after (best effort); `stop()` ends the subscription and releases connections. `publish` never throws
 * (a backing service that is down is logged, and readers fall back to polling the log).
 */
export interface Notifier {
  start(onWake: () => void): Promise<void>;
  publish(): void;
  stop(): Promise<void>;
}
