import type { Clock } from './ports/clock.js';

/**
 * The default clock: the system's time and Node's timers, looked up at each call (so vitest's fake timers, installed
 * after the service was made, are followed too). The only place in core that reads the system time.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
  setInterval: (callback, ms) => setInterval(callback, ms),
  clearInterval: (timer) => clearInterval(timer as NodeJS.Timeout | undefined),
};
