import { inject, injectable } from 'tsyringe';
import type { GenerationRecord } from '../domain/types.js';
import { isRemoteJobProvider, ModelRegistry } from '../domain/registry.js';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { JobQueue } from '../ports/queue.js';
import { TOKENS } from '../tokens.js';
import { type Failing, Lifecycle } from './lifecycle.js';

/**
 * Cancelling on its owner's behalf: the Lifecycle's cancel (the transition and its fee), then what must stop with it:
 * a run of it on this instance is aborted, and a remote job it started upstream is told to stop (nobody is left to
 * check it). The runner asks `cancelUpstream` too, for a remote job it can no longer follow.
 */
@injectable()
export class Cancellation {
  private readonly logger: Logger;

  constructor(
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'lifecycle' });
  }

  /** Cancels a pending or processing generation; the generation as failed, or null when there was nothing to cancel. */
  async cancel(gen: Failing): Promise<GenerationRecord | null> {
    const cancelled = await this.lifecycle.cancel(gen);
    if (!cancelled) return null;
    this.queue.abort?.(gen.id);
    // A worker that stores a handle after this cancel stops its job itself (its setRemoteHandle is refused).
    if (cancelled.remoteHandle !== undefined) await this.cancelUpstream(cancelled.modelId, gen.id, cancelled.remoteHandle);
    return cancelled;
  }

  /** Cancels, free and at once, every member of the batch no worker has started; answers their ids. */
  cancelPendingOfBatch(batchId: string): Promise<string[]> {
    return this.lifecycle.cancelPendingOfBatch(batchId);
  }

  /** Cancels each of these generations (each as a single cancel); answers how many it cancelled. */
  async cancelAll(gens: readonly Failing[]): Promise<number> {
    let cancelled = 0;
    for (const gen of gens) if (await this.cancel(gen)) cancelled++;
    return cancelled;
  }

  /** Best effort: an upstream job nobody will check any more is told to stop. */
  async cancelUpstream(modelId: string, generationId: string, handle: unknown): Promise<void> {
    const provider = this.registry.get(modelId)?.provider;
    if (!provider || !isRemoteJobProvider(provider) || !provider.cancel) return;
    try {
      await provider.cancel(handle, { generationId, logger: this.logger });
    } catch (err) {
      this.logger.warn({ err: asError(err), generationId }, 'cancelling the upstream job failed');
    }
  }
}
