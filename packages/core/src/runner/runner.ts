import { inject, injectable } from 'tsyringe';
import { ProviderError } from '../errors.js';
import { Lifecycle } from '../lifecycle.js';
import { childLogger } from '../logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { BlobStore } from '../ports/blob.js';
import type { Logger } from '../ports/logger.js';
import type { GenerationOutput } from '../ports/provider.js';
import type { Job } from '../ports/queue.js';
import { ModelRegistry, type RegisteredModel } from '../registry.js';
import { TOKENS } from '../tokens.js';

class TimeoutAbort extends Error {
  override readonly name = 'TimeoutAbort' as const;
}

/** A provider's result that breaks the provider contract; fails the generation like a non-retryable error. */
class BadOutput extends ProviderError {}

/** At most one progress event per generation per this many ms; the latest value in between is written at its end. */
export const PROGRESS_INTERVAL_MS = 1000;

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

interface HeldRun {
  controller: AbortController;
  log: Logger;
}

/**
 * Runs one generation: claim it, call its provider with a deadline and retries, store the result. Every state change
 * is the Lifecycle's; the runner owns only running, retrying, timing out and keeping leases. Every queue (in-process or
 * distributed) hands its jobs here, so they all behave alike.
 */
@injectable()
export class Runner {
  private readonly logger: Logger;
  /** Runs this worker holds, by generation id: one timer renews all their leases (not one timer per run). */
  private readonly held = new Map<string, HeldRun>();
  private renewTimer: NodeJS.Timeout | undefined;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(TOKENS.Registry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'runner' });
  }

  private keepLeases(): void {
    if (this.renewTimer) return;
    this.renewTimer = setInterval(() => {
      if (this.held.size === 0) {
        clearInterval(this.renewTimer);
        this.renewTimer = undefined;
        return;
      }
      for (const [id, run] of this.held) {
        this.lifecycle.renew(id).then(
          (stillHeld) => {
            // Lost (a stall let it expire and another worker took it) or finished by someone else (cancelled).
            if (!stillHeld) run.controller.abort(new Error('lease lost'));
          },
          (err: unknown) => run.log.warn({ err: String(err) }, 'lease renewal failed'),
        );
      }
    }, Math.max(50, Math.floor(this.options.runner.leaseMs / 3)));
    this.renewTimer.unref?.();
  }

  async run(job: Job, queueSignal: AbortSignal): Promise<void> {
    const rec = await this.lifecycle.claim(job.generationId);
    if (!rec) return; // Someone else holds it, or it is finished: nothing to do.
    const log = childLogger(this.logger, { generationId: rec.id, modelId: rec.modelId, attempt: rec.attempts });
    const model = this.registry.get(rec.modelId);
    if (!model) {
      await this.lifecycle.failClaimed(rec.id, { code: 'model_unavailable', reason: 'model no longer exists', fee: 'free' }, 0);
      return;
    }
    if (this.lifecycle.exhausted(rec.attempts - 1)) {
      await this.lifecycle.failClaimed(
        rec.id,
        { code: 'worker_lost', reason: `gave up after ${rec.attempts - 1} lost runs`, fee: 'failure_fee' },
        model.failureFee,
      );
      return;
    }
    log.info({ status: 'processing' }, 'generation processing');

    const controller = new AbortController();
    const deadline = Date.now() + model.timeoutMs;
    const onQueueAbort = (): void => controller.abort(queueSignal.reason);
    queueSignal.addEventListener('abort', onQueueAbort, { once: true });
    const timeout = setTimeout(() => controller.abort(new TimeoutAbort(`timed out after ${model.timeoutMs} ms`)), model.timeoutMs);
    this.held.set(rec.id, { controller, log });
    this.keepLeases();
    const progress = this.progressReporter(rec.id, log);

    const onAborted = async (): Promise<void> => {
      const reason: unknown = controller.signal.reason;
      if (reason instanceof TimeoutAbort) {
        await this.lifecycle.failClaimed(
          rec.id,
          { code: 'timeout', publicMessage: `The generation took longer than ${Math.round(model.timeoutMs / 1000)} s.`, reason: reason.message, fee: 'failure_fee' },
          model.failureFee,
        );
      } else {
        // Cancelled (the canceller already failed it), shutting down or lease lost: an unfinished generation is
        // retried by recovery once its lease expires.
        log.info({ reason: reason instanceof Error ? reason.message : String(reason) }, 'generation run aborted');
      }
    };

    try {
      for (let attempt = 1; ; attempt++) {
        try {
          const output = await model.provider.generate(
            { model: model.definition, settings: rec.settings },
            {
              generationId: rec.id,
              signal: controller.signal,
              deadline,
              attempt: rec.attempts,
              files: { put: (bytes, mimeType) => this.blobs.put(bytes, mimeType) },
              logger: log,
              progress: progress.report,
            },
          );
          if (controller.signal.aborted) throw controller.signal.reason;
          progress.stop();
          await this.finishCompleted(rec.id, rec.reserved, model, output, log);
          return;
        } catch (err) {
          if (controller.signal.aborted) {
            await onAborted();
            return;
          }
          const retryable = err instanceof ProviderError && err.retryable;
          const message = err instanceof Error ? err.message : String(err);
          if (retryable && attempt < model.maxAttempts) {
            const delay = Math.min(this.options.runner.retryMaxDelayMs, this.options.runner.retryBaseDelayMs * 2 ** (attempt - 1));
            log.warn({ err: message, retryInMs: delay }, 'provider failed; retrying');
            await sleep(delay, controller.signal);
            if (controller.signal.aborted) {
              await onAborted();
              return;
            }
            continue;
          }
          if (!(err instanceof ProviderError)) log.error({ err: message }, 'provider threw an unexpected error');
          progress.stop();
          // Only a ProviderError's own publicMessage reaches the owner; anything else gets the generic sentence.
          await this.lifecycle.failClaimed(
            rec.id,
            {
              code: err instanceof ProviderError ? err.code : 'provider_error',
              ...(err instanceof ProviderError && err.publicMessage !== undefined ? { publicMessage: err.publicMessage } : {}),
              reason: message,
              fee: 'failure_fee',
            },
            model.failureFee,
          );
          return;
        }
      }
    } finally {
      progress.stop();
      clearTimeout(timeout);
      this.held.delete(rec.id);
      queueSignal.removeEventListener('abort', onQueueAbort);
    }
  }

  /**
   * `ctx.progress` of one run, throttled: the first report is written at once, later ones at most one per
   * PROGRESS_INTERVAL_MS (the latest value wins), and none after the run ends.
   */
  private progressReporter(id: string, log: Logger): { report: (fraction: number, message?: string) => void; stop: () => void } {
    let lastAt = 0;
    let pending: { fraction: number; message?: string } | undefined;
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const write = (p: { fraction: number; message?: string }): void => {
      lastAt = Date.now();
      this.lifecycle.progress(id, p.fraction, p.message).catch((err: unknown) => log.warn({ err: String(err) }, 'progress not recorded'));
    };
    return {
      report: (fraction, message) => {
        if (stopped || typeof fraction !== 'number') return;
        const p = message === undefined ? { fraction } : { fraction, message };
        const wait = lastAt + PROGRESS_INTERVAL_MS - Date.now();
        if (wait <= 0 && !timer) return write(p);
        pending = p;
        timer ??= setTimeout(() => {
          timer = undefined;
          if (!stopped && pending) write(pending);
          pending = undefined;
        }, Math.max(0, wait));
      },
      stop: () => {
        stopped = true;
        if (timer) clearTimeout(timer);
        timer = undefined;
      },
    };
  }

  private async finishCompleted(id: string, reserved: number, model: RegisteredModel, output: GenerationOutput, log: Logger): Promise<void> {
    let resultText: string | undefined;
    let resultKey: string | undefined;
    let stored = false;
    try {
      if (output.price !== undefined && !(typeof output.price === 'number' && Number.isFinite(output.price) && output.price >= 0)) {
        throw new BadOutput(`the provider priced the result at ${String(output.price)}`);
      }
      if ('text' in output && typeof output.text === 'string') {
        if (model.info.resultType !== 'text') throw new BadOutput(`a ${model.info.resultType} model returned text`);
        resultText = output.text;
      } else if ('bytes' in output && output.bytes instanceof Uint8Array) {
        if (model.info.resultType === 'text') throw new BadOutput('a text model must return { text }');
        resultKey = await this.blobs.put(output.bytes, output.mimeType);
        stored = true;
      } else if ('file' in output && typeof output.file === 'string') {
        if (model.info.resultType === 'text') throw new BadOutput('a text model must return { text }');
        resultKey = output.file;
      } else {
        throw new BadOutput('the provider returned no result');
      }
    } catch (err) {
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'provider broke its contract');
      await this.lifecycle.failClaimed(id, { code: 'provider_error', reason: err instanceof Error ? err.message : String(err), fee: 'failure_fee' }, model.failureFee);
      return;
    }
    const price = Math.min(reserved, output.price ?? reserved);
    const ok = await this.lifecycle.complete(id, { price, ...(resultText !== undefined ? { resultText } : {}), ...(resultKey !== undefined ? { resultKey } : {}) });
    if (!ok) {
      // Another worker took over (our lease expired) or the generation was cancelled: our result is void.
      log.warn({}, 'completion refused by the store; result discarded');
      if (resultKey && stored) await this.blobs.delete(resultKey);
    }
  }
}
