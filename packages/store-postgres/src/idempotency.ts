import type { IdempotencyBegin, IdempotencyStore } from '@genservice/core';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey } from './db.js';

/**
 * Idempotency-Key records on PostgreSQL. The (user_id, key) primary key makes `begin` atomic across processes:
 * of concurrent inserts exactly one succeeds, the others wait for it and then read its row.
 */
export class PostgresIdempotencyStore implements IdempotencyStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice');
  }

  async begin(userId: string, key: string, requestHash: string, now: number): Promise<IdempotencyBegin> {
    const s = this.db.s;
    // Bounded: each retry means another request abandoned the key in between, which cannot go on for long.
    for (let attempt = 0; attempt < 5; attempt++) {
      const inserted = await this.db.query(
        `INSERT INTO ${s}.idempotency_keys (user_id, key, request_hash, created_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (user_id, key) DO NOTHING`,
        [encodeKey(userId), encodeKey(key), encodeKey(requestHash), Math.trunc(now)],
      );
      if (inserted.rowCount === 1) return { state: 'new' };
      const { rows } = await this.db.query<{ generation_id: string | null; request_hash: string }>(
        `SELECT generation_id, request_hash FROM ${s}.idempotency_keys WHERE user_id = $1 AND key = $2`,
        [encodeKey(userId), encodeKey(key)],
      );
      const row = rows[0];
      if (!row) continue;
      if (row.generation_id === null) return { state: 'in_progress', requestHash: decodeKey(row.request_hash) };
      return { state: 'done', generationId: decodeKey(row.generation_id), requestHash: decodeKey(row.request_hash) };
    }
    // The key kept changing hands: report it busy (409), which a client retries.
    return { state: 'in_progress', requestHash };
  }

  async finish(userId: string, key: string, generationId: string): Promise<void> {
    // The first finish wins: a later one must not re-point a key a client may already have seen answered.
    await this.db.query(
      `UPDATE ${this.db.s}.idempotency_keys SET generation_id = $3
       WHERE user_id = $1 AND key = $2 AND generation_id IS NULL`,
      [encodeKey(userId), encodeKey(key), encodeKey(generationId)],
    );
  }

  async abandon(userId: string, key: string): Promise<void> {
    // Only an unfinished record: once a generation exists, a retry must get that generation, not a new one.
    await this.db.query(
      `DELETE FROM ${this.db.s}.idempotency_keys WHERE user_id = $1 AND key = $2 AND generation_id IS NULL`,
      [encodeKey(userId), encodeKey(key)],
    );
  }

  async purgeBefore(before: number): Promise<number> {
    const res = await this.db.query(`DELETE FROM ${this.db.s}.idempotency_keys WHERE created_at < $1`, [
      Math.ceil(before),
    ]);
    return res.rowCount ?? 0;
  }
}
