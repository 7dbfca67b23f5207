import { ProviderError } from '../domain/errors.js';
import type { RegisteredModel } from '../domain/registry.js';
import type { GenerationRecord } from '../domain/types.js';
import type { Clock } from '../ports/clock.js';
import type { Logger } from '../ports/logger.js';
import type { GenerationContext } from '../ports/provider.js';
import type { Candidate } from './fallbacks.js';
import type { JobAbort } from './job-signal.js';
import { type OutputSink, OutputReporter } from './output-stream.js';
import { type ProgressSink, ProgressReporter } from './progress.js';

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
  /** The fallback that served it, once one did (provider-calls.ts). */
  servedBy?: Candidate;
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

/** Where every run's reporters write, made once (by Execution), not per run. */
export interface ReporterSinks {
  progress: ProgressSink;
  output(generationId: string): OutputSink;
  clock: Clock;
}

/**
 * The `ctx` a provider gets. A class, so a run builds it as cheaply as a plain object: `signal` is a getter on the
 * prototype that makes the run's AbortSignal on first read (see job-signal.ts), where a getter in an object literal
 * would cost a runtime call per run. `progress` and `output` are getters too, which bind their functions on first
 * read (most providers read neither: three bound functions and an object less per run, issue 36); what they answer is
 * bound, as `files.put` is, so safe to pass around on its own, and the same on every read.
 *
 * Most providers never report progress or partial output, so the reporters (progress.ts, output-stream.ts) and the
 * output's sink are made on the first report, not for every run (issue 36); `progress` and `output` forward to them.
 * Once stopped, a report is ignored, as a stopped reporter would.
 */
export class RunContext implements GenerationContext {
  readonly generationId: string;
  readonly deadline: number;
  readonly claim: number;
  readonly logger: Logger;
  readonly #abort: JobAbort;
  readonly #sinks: ReporterSinks;
  #progress: ProgressReporter | undefined = undefined;
  #output: OutputReporter | undefined = undefined;
  #progressStopped = false;
  #outputStopped = false;
  #progressFn: GenerationContext['progress'] | undefined = undefined;
  #outputFns: GenerationContext['output'] | undefined = undefined;

  constructor(
    run: Run,
    readonly files: GenerationContext['files'],
    sinks: ReporterSinks,
  ) {
    this.generationId = run.rec.id;
    this.deadline = run.deadline;
    this.claim = run.rec.claims;
    this.logger = run.log;
    this.#abort = run.abort;
    this.#sinks = sinks;
  }

  get progress(): GenerationContext['progress'] {
    return (this.#progressFn ??= this.#report.bind(this));
  }

  get output(): GenerationContext['output'] {
    return (this.#outputFns ??= { append: this.#append.bind(this), preview: this.#preview.bind(this) });
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The run's progress reporter, once something was reported. */
  get progressReporter(): ProgressReporter | undefined {
    return this.#progress;
  }

  /** The run's output reporter, once something was reported. */
  get outputReporter(): OutputReporter | undefined {
    return this.#output;
  }

  /** No progress is written from now on (the run's result is in, or it ended). */
  stopProgress(): void {
    this.#progressStopped = true;
    this.#progress?.stop();
  }

  /** No partial output is written from now on (what was pending is flushed first, where it must be). */
  stopOutput(): void {
    this.#outputStopped = true;
    this.#output?.stop();
  }

  #report(fraction: number, message?: string): void {
    if (this.#progressStopped) return;
    (this.#progress ??= new ProgressReporter(this.#sinks.progress, this.generationId, this.logger, this.#sinks.clock)).report(fraction, message);
  }

  #append(text: string): void {
    if (!this.#outputStopped) this.#outputs().append(text);
  }

  #preview(bytes: Uint8Array, mimeType: string): void {
    if (!this.#outputStopped) this.#outputs().preview(bytes, mimeType);
  }

  #outputs(): OutputReporter {
    return (this.#output ??= new OutputReporter(this.#sinks.output(this.generationId), this.logger, this.#sinks.clock));
  }
}
