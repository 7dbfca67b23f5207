/**
 * The poll of the repository's tests: one `until` (and its yes/no form) that every package's tests import, until
 * `@genservice/testing` exports one. A poll waits for an outcome; it is not a fixed sleep.
 */
// Taken when this module loads, before a test installs vitest's fake timers: a poll keeps looking in real time
// without moving (or being frozen by) a fake clock.
const realSetTimeout = globalThis.setTimeout;
const realNow = performance.now.bind(performance);
/** How often `until` looks again by default: a poll's pace, not a wait for something to have happened. */
const POLL_EVERY_MS = 5;

/**
 * Polls `read` until `ok` holds and answers that value, failing after `ms`: a wait for an outcome (a status, a count,
 * a record), never for a time. Works beside a FakeClock and beside vitest's fake timers alike (it moves neither).
 */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000, every = POLL_EVERY_MS): Promise<T> {
  const end = realNow() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (realNow() > end) throw new Error(`condition not met within ${ms} ms: ${JSON.stringify(v)}`);
    await new Promise((resolve) => realSetTimeout(resolve, every));
  }
}

/** `until` for a yes/no check, naming what it waits for in its failure. */
export async function untilTrue(check: () => boolean | Promise<boolean>, what: string, ms = 15_000, every = POLL_EVERY_MS): Promise<void> {
  await until(
    async () => await check(),
    (yes) => yes,
    ms,
    every,
  ).catch((err: unknown) => {
    throw new Error(`timed out waiting for ${what} (${err instanceof Error ? err.message : String(err)})`);
  });
}
