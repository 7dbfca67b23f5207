import { ProviderError } from '../domain/errors.js';
import type { RegisteredModel } from '../domain/registry.js';
import type { GenerationRecord } from '../domain/types.js';
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { GenerationContext } from '../ports/provider.js';
import type { JobAbort } from './job-signal.js';

/** One claimed run, as the runner's classes hand it to each other. */
export interface Run {
  rec: GenerationRecord;
  model: RegisteredModel;
  /** Aborted on a timeout, a lost lease, a cancel, or when the queue stops. */
  abort: JobAbort;
  log: Logger;
  /** Epoch ms its time runs out. */
  deadline: number;
  /** A remote job's handle, once started (or as an earlier run stored it). */
  handle?: unknown;
  /** What it holds in its provider's lane (capacity-gate.ts). */
  capacity?: RunCapacity;
}

/**
 * The provider lanes a run holds, under one permit id (its admission's). `fresh`: the request taken at admission,
 * not sent yet (the first provider call uses it; a run that never calls gives it back).
 */
export interface RunCapacity {
  permitId: string;
  held: Set<string>;
  fresh?: { lane: string; at: number };
}

/** The upstream asked to wait (a 429's `Retry-After`), or the lane is paused for longer: the run parks for `delayMs`. */
export class LanePaused extends Error {
  override readonly name = 'LanePaused' as const;
  constructor(readonly delayMs: number) {
    super(`the provider's lane is paused for ${delayMs} ms`);
  }
}

/** Why a run was aborted when its model's time ran out. */
export class TimeoutAbort extends Error {
  override readonly name = 'TimeoutAbort' as const;
}

/** A provider's result that breaks the provider contract; fails the generation like a non-retryable error. */
export class BadOutput extends ProviderError {}

/** The blob store could not be reached: worth trying again, and never the owner's or the model's fault. */
export class StorageUnavailable extends ProviderError {
  constructor(cause: unknown) {
    super(`the blob store is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, {
      retryable: true,
      publicMessage: 'The result could not be stored. Please try again.',
      cause,
    });
  }
}

/** Waits `ms` on the clock, or less when the run is aborted first. */
export function sleep(clock: Clock, ms: number, abort: JobAbort): Promise<void> {
  return new Promise((resolve) => {
    if (abort.aborted) return resolve();
    const t = clock.setTimeout(done, ms);
    const unlisten = abort.onAbort(done);
    function done(): void {
      clock.clearTimeout(t);
      unlisten();
      resolve();
    }
  });
}

/**
 * The `ctx` a provider gets. A class, so a run builds it as cheaply as a plain object: `signal` is a getter on the
 * prototype that makes the run's AbortSignal on first read (see job-signal.ts), where a getter in an object literal
 * would cost a runtime call per run. Every other member is an own property (`progress` and `files.put` are bound
 * functions, safe to pass around on their own).
 */
export class RunContext implements GenerationContext {
  readonly generationId: string;
  readonly deadline: number;
  readonly claim: number;
  readonly logger: Logger;
  readonly #abort: JobAbort;

  constructor(
    run: Run,
    readonly files: GenerationContext['files'],
    readonly progress: GenerationContext['progress'],
    readonly output: GenerationContext['output'],
  ) {
    this.generationId = run.rec.id;
    this.deadline = run.deadline;
    this.claim = run.rec.claims;
    this.logger = run.log;
    this.#abort = run.abort;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }
}
