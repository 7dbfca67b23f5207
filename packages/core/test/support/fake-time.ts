import { vi } from 'vitest';
import type { GenerationService } from '@genservice/core';
import type { FakeClock } from '@genservice/testing';

/**
 * Polls `read` until `ok` holds and answers that value (vitest's poll, every 5 ms, at most `ms`): a wait for an
 * outcome, not for a time. With a FakeClock it involves no timer of the service's clock.
 */
export function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  return vi.waitFor(
    async () => {
      const v = await read();
      if (!ok(v)) throw new Error(`condition not met: ${JSON.stringify(v)}`);
      return v;
    },
    { timeout: ms, interval: 5 },
  );
}

/**
 * Stops a service whose clock is a FakeClock: its stop waits on that clock (for running work, then after aborting
 * it), so the clock is moved until the stop is done.
 */
export async function stopOn(clock: FakeClock, service: GenerationService, timeoutMs = 100): Promise<void> {
  let stopped = false;
  const stop = service.stop({ timeoutMs }).then(() => (stopped = true));
  while (!stopped) await clock.advance(timeoutMs);
  await stop;
}
