import type { GenerationService } from '@genservice/core';
import type { FakeClock } from '@genservice/testing';


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
