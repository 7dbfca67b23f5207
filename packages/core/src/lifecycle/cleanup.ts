import { inject, injectable } from 'tsyringe';
import { previewKeys, type GenerationRecord } from '../domain/types.js';
import type { BlobStore } from '../ports/blob.js';
import type { GenerationStore } from '../ports/store.js';
import type { WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { GenerationLog } from './generation-log.js';

/**
 * Removing finished generations for good: which ones are due (the expiry listing of the retention sweep) and the
 * purge itself (files, records with their events, webhook deliveries), for the sweep and for a DELETE alike.
 */
@injectable()
export class Cleanup {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(GenerationLog) private readonly log: GenerationLog,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(TOKENS.WebhookStore) private readonly webhookStore: WebhookStore,
  ) {}

  /**
   * The next batch of expired generations for the sweep, at most `limit`: past the service's retention first, then
   * those whose own life ended (each query by its index; a generation in both is taken once).
   */
  async expired(now: number, limit: number): Promise<GenerationRecord[]> {
    const ttl = this.options.retention.finishedTtlMs;
    const batch = ttl === undefined ? [] : await this.store.listFinishedBefore(now - ttl, limit);
    if (batch.length >= limit) return batch;
    const taken = new Set(batch.map((r) => r.id));
    for (const r of await this.store.listLifeEndedBefore(now, limit)) {
      if (batch.length >= limit) break;
      if (!taken.has(r.id)) batch.push(r);
    }
    return batch;
  }

  /**
   * Deletes finished generations for good (a DELETE, or retention): their files first, in one batched call, then
   * each record with its events, then their webhook deliveries. Files go first so that a blob store that cannot be
   * reached (the call throws) leaves every record as it was, to be tried again. Answers how many records it removed.
   * A generation's previews are among its files: its events name them (one read of its log each).
   */
  async purge(recs: readonly GenerationRecord[]): Promise<number> {
    const keys = recs.flatMap((r) => (r.resultKey === undefined ? [] : [r.resultKey]));
    // Previews are files too, named only by their events.
    for (const r of recs) keys.push(...previewKeys(await this.store.eventsOf(r.id)));
    if (keys.length > 0) await this.blobs.deleteMany(keys);
    const removed = await this.log.removeFinished(recs.map((r) => r.id));
    if (removed.length === 0) return 0;
    await this.webhookStore.deleteForGenerations(removed);
    return removed.length;
  }
}
