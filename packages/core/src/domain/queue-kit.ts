import { UnavailableError } from './errors.js';
import type { Job } from '../ports/queue.js';

/**
 * What a durable queue (BullMQ, pg-boss) shares: the job's fields as stored in the backend, a wait bounded in time,
 * and an enqueue that answers `UnavailableError` when the backend does not answer in time.
 */

/** The job's own fields, copied for the backend's storage (no `undefined` keys, no trace: the queue adds its own). */
export function jobFields(job: Job): Job {
  return {
    generationId: job.generationId,
    modelId: job.modelId,
    ...(job.ownerId !== undefined ? { ownerId: job.ownerId } : {}),
    ...(job.organizationId !== undefined ? { organizationId: job.organizationId } : {}),
    ...(job.weight !== undefined ? { weight: job.weight } : {}),
    ...(job.priority !== undefined ? { priority: job.priority } : {}),
  };
}

/** True when `promise` settled (either way) within `ms`, false when it had not by then. */
export function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** An error's message, or the thrown value as text. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Waits for `adding` (the backend's add of `generationId`'s job) at most `timeoutMs`; a failure or no answer in time
 * is an `UnavailableError` naming `backend` (core turns it into a 503 and keeps nothing reserved). The loser of the
 * race may still land later, once the backend answers: harmless, since core has failed the generation by then and
 * the job's claim finds nothing to do. Its rejection never surfaces as unhandled.
 */
export async function enqueueWithin(adding: Promise<unknown>, timeoutMs: number, generationId: string, backend: string): Promise<void> {
  adding.catch(() => undefined);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      adding,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer from ${backend} within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (err) {
    throw new UnavailableError(`could not enqueue generation ${generationId}: ${messageOf(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
