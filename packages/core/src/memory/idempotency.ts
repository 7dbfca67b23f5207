import type { IdempotencyBegin, IdempotencyRecord, IdempotencyStore } from '../ports/idempotency.js';

/**
 * Idempotency records in nested Maps (user, then key), so no separator in a key can make two users' keys collide.
 * Every method checks and writes in one synchronous step, so of concurrent calls exactly one wins.
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly byUser = new Map<string, Map<string, IdempotencyRecord>>();

  async begin(userId: string, key: string, requestHash: string, now: number, generationId: string): Promise<IdempotencyBegin> {
    let records = this.byUser.get(userId);
    if (!records) {
      records = new Map();
      this.byUser.set(userId, records);
    }
    const existing = records.get(key);
    if (existing) {
      return existing.done
        ? { state: 'done', generationId: existing.generationId, requestHash: existing.requestHash }
        : { state: 'in_progress', requestHash: existing.requestHash, generationId: existing.generationId, startedAt: existing.startedAt };
    }
    records.set(key, { userId, key, requestHash, generationId, done: false, startedAt: now, createdAt: now });
    return { state: 'new' };
  }

  async takeOver(userId: string, key: string, staleBefore: number, now: number, generationId: string): Promise<boolean> {
    const record = this.byUser.get(userId)?.get(key);
    if (!record || record.done || record.startedAt >= staleBefore) return false;
    record.startedAt = now;
    record.generationId = generationId;
    return true;
  }

  async finish(userId: string, key: string, generationId: string): Promise<boolean> {
    const record = this.byUser.get(userId)?.get(key);
    if (!record || record.generationId !== generationId) return false;
    // The first finish wins; finishing again with the same id is a harmless retry.
    record.done = true;
    return true;
  }

  async abandon(userId: string, key: string, generationId: string): Promise<void> {
    const records = this.byUser.get(userId);
    const record = records?.get(key);
    // A finished key stays: forgetting it would let a retry create a second generation. A key another request took
    // over is that request's to finish.
    if (records && record && !record.done && record.generationId === generationId) {
      records.delete(key);
      if (records.size === 0) this.byUser.delete(userId);
    }
  }

  async purgeBefore(before: number): Promise<number> {
    let purged = 0;
    for (const [userId, records] of this.byUser) {
      for (const [key, record] of records) {
        if (record.createdAt < before) {
          records.delete(key);
          purged += 1;
        }
      }
      if (records.size === 0) this.byUser.delete(userId);
    }
    return purged;
  }
}
