import { inject, injectable } from 'tsyringe';
import { ProviderError } from '../errors.js';
import { childLogger } from '../logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { BlobStore } from '../ports/blob.js';
import type { Ledger } from '../ports/ledger.js';
import type { Logger } from '../ports/logger.js';
import type { GenerationOutput } from '../ports/provider.js';
import type { Job } from '../ports/queue.js';
import type { GenerationStore } from '../ports/store.js';
import { ModelRegistry, type RegisteredModel } from '../registry.js';
import { TOKENS } from '../tokens.js';

class TimeoutAbort extends Error {
  override readonly name = 'TimeoutAbort' as const;
}

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

/**
 * Runs one generation: claim it in the store, call its provider with a deadline and retries, store the result,
 * and settle the bill. Every queue (in-process or distributed) hands its jobs here, so they all behave alike.
 */
@injectable()
export class Executor {
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(TOKENS.Registry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'runner' });
  }

  /** Runs this worker holds, by generation id: one timer renews all their leases (not one timer per run). */
  private readonly held = new Map<string, { controller: AbortController; log: Logger }>();
  private renewTimer: NodeJS.Timeout | undefined;

  private keepLeases(): void {
    if (this.renewTimer) return;
    const { leaseMs } = this.options.runner;
    this.renewTimer = setInterval(() => {
      if (this.held.size === 0) {
        clearInterval(this.renewTimer);
        this.renewTimer = undefined;
        return;
      }
      const now = Date.now();
      for (const [id, run] of this.held) {
        this.store.renewLease(id, this.options.instanceId, leaseMs, now).then(
          (stillHeld) => {
            // Lost (a stall let it expire and another worker took it) or finished by someone else (cancelled).
            if (!stillHeld) run.controller.abort(new Error('lease lost'));
          },
          (err: unknown) => run.log.warn({ err: String(err) }, 'lease renewal failed'),
        );
      }
    }, Math.max(50, Math.floor(leaseMs / 3)));
    this.renewTimer.unref?.();
  }

  /** Fails a generation that no worker holds and settles its failure fee. Returns whether it did. */
  async failUnclaimed(generationId: string, reason: string, fee: number, force = false): Promise<boolean> {
    const ok = await this.store.fail(generationId, { price: fee, reason, now: Date.now(), force });
    if (ok) await this.ledger.settle(generationId, fee);
    return ok;
  }

  async run(job: Job, queueSignal: AbortSignal): Promise<void> {
    const { runner } = this.options;
    const workerId = this.options.instanceId;
    const rec = await this.store.claim(job.generationId, { workerId, leaseMs: runner.leaseMs, now: Date.now() });
    if (!rec) return; // Someone else holds it, or it is finished: nothing to do.
    const log = childLogger(this.logger, { generationId: rec.id, modelId: rec.modelId, attempt: rec.attempts });
    const model = this.registry.get(rec.modelId);
    if (!model) {
      await this.finishFailed(rec.id, workerId, 0, 'model no longer exists', log);
      return;
    }
    if (rec.attempts > runner.maxClaims) {
      await this.finishFailed(rec.id, workerId, model.failureFee, `gave up after ${rec.attempts - 1} lost runs`, log);
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

    const onAborted = async (): Promise<void> => {
      const reason: unknown = controller.signal.reason;
      if (reason instanceof TimeoutAbort) {
        await this.finishFailed(rec.id, workerId, model.failureFee, reason.message, log);
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
            },
          );
          if (controller.signal.aborted) throw controller.signal.reason;
          await this.finishCompleted(rec.id, workerId, rec.reserved, model, output, log);
          return;
        } catch (err) {
          if (controller.signal.aborted) {
            await onAborted();
            return;
          }
          const retryable = err instanceof ProviderError && err.retryable;
          const message = err instanceof Error ? err.message : String(err);
          if (retryable && attempt < model.maxAttempts) {
            const delay = Math.min(runner.retryMaxDelayMs, runner.retryBaseDelayMs * 2 ** (attempt - 1));
            log.warn({ err: message, retryInMs: delay }, 'provider failed; retrying');
            await sleep(delay, controller.signal);
            if (controller.signal.aborted) {
              await onAborted();
              return;
            }
            continue;
          }
          if (!(err instanceof ProviderError)) log.error({ err: message }, 'provider threw an unexpected error');
          await this.finishFailed(rec.id, workerId, model.failureFee, message, log);
          return;
        }
      }
    } finally {
      clearTimeout(timeout);
      this.held.delete(rec.id);
      queueSignal.removeEventListener('abort', onQueueAbort);
    }
  }

  private async finishCompleted(
    id: string,
    workerId: string,
    reserved: number,
    model: RegisteredModel,
    output: GenerationOutput,
    log: Logger,
  ): Promise<void> {
    let resultText: string | undefined;
    let resultKey: string | undefined;
    if ('text' in output && typeof output.text === 'string') {
      if (model.info.resultType !== 'text') throw new ProviderError(`a ${model.info.resultType} model returned text`);
      resultText = output.text;
    } else if ('bytes' in output && output.bytes instanceof Uint8Array) {
      resultKey = await this.blobs.put(output.bytes, output.mimeType);
    } else if ('file' in output && typeof output.file === 'string') {
      resultKey = output.file;
    } else {
      throw new ProviderError('the provider returned no result');
    }
    if (model.info.resultType === 'text' && resultText === undefined) {
      throw new ProviderError('a text model must return { text }');
    }
    const price = Math.min(reserved, Math.max(0, output.price ?? reserved));
    const ok = await this.store.complete(id, { workerId, price, resultText, resultKey, now: Date.now() });
    if (!ok) {
      // Another worker took over (our lease expired) or the generation was cancelled: our result is void.
      log.warn({}, 'completion refused by the store; result discarded');
      if (resultKey && !('file' in output)) await this.blobs.delete(resultKey);
      return;
    }
    await this.ledger.settle(id, price);
    log.info({ status: 'completed', price }, 'generation completed');
  }

  private async finishFailed(id: string, workerId: string, fee: number, reason: string, log: Logger): Promise<void> {
    const ok = await this.store.fail(id, { workerId, price: fee, reason, now: Date.now() });
    if (!ok) {
      log.warn({ reason }, 'failure refused by the store (not this worker\'s any more)');
      return;
    }
    await this.ledger.settle(id, fee);
    log.info({ status: 'failed', price: fee, reason }, 'generation failed');
  }
}
