import type { IdempotencyBegin, IdempotencyRecord, IdempotencyStore } from '../ports/idempotency.js';

/**
 * Idempotency records in nested Maps (user, then key), so no separator in a key can make two users' keys collide.
 * `begin` checks and inserts in one synchronous step, so of concurrent calls exactly one sees `new`.
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly byUser = new Map<string, Map<string, IdempotencyRecord>>();

  async begin(userId: string, key: string, requestHash: string, now: number): Promise<IdempotencyBegin> {
    let records = this.byUser.get(userId);
    if (!records) {
      records = new Map();
      this.byUser.set(userId, records);
    }
    const existing = records.get(key);
    if (existing) {
      return existing.generationId === undefined
        ? { state: 'in_progress', requestHash: existing.requestHash }
        : { state: 'done', generationId: existing.generationId, requestHash: existing.requestHash };
    }
    records.set(key, { userId, key, requestHash, createdAt: now });
    return { state: 'new' };
  }

  async finish(userId: string, key: string, generationId: string): Promise<void> {
    const record = this.byUser.get(userId)?.get(key);
    // The first finish wins: a later one must not re-point a key a client may already have seen answered.
    if (record && record.generationId === undefined) record.generationId = generationId;
  }

  async abandon(userId: string, key: string): Promise<void> {
    const records = this.byUser.get(userId);
    const record = records?.get(key);
    // A finished key stays: forgetting it would let a retry create a second generation.
    if (records && record && record.generationId === undefined) {
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
