import type { IdempotencyBegin, IdempotencyStore } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey, num, type PgStatementOptions } from './db.js';

/**
 * Idempotency-Key records on PostgreSQL. The (user_id, key) primary key makes `begin` atomic across processes: of
 * concurrent inserts exactly one succeeds, the others wait for it and then read its row. `takeOver`, `finish` and
 * `abandon` are single conditional statements, so the row lock decides their races.
 */
export class PostgresIdempotencyStore implements IdempotencyStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
  }

  async begin(userId: string, key: string, requestHash: string, now: number, generationId: string): Promise<IdempotencyBegin> {
    const s = this.db.s;
    // Bounded: each retry means another request abandoned the key in between, which cannot go on for long.
    for (let attempt = 0; attempt < 5; attempt++) {
      const inserted = await this.db.query(
        `INSERT INTO ${s}.idempotency_keys (user_id, key, request_hash, generation_id, done, started_at, created_at)
         VALUES ($1, $2, $3, $4, false, $5, $5)
         ON CONFLICT (user_id, key) DO NOTHING`,
        [encodeKey(userId), encodeKey(key), encodeKey(requestHash), encodeKey(generationId), Math.trunc(now)],
      );
      if (inserted.rowCount === 1) return { state: 'new' };
      const { rows } = await this.db.query<{ generation_id: string; request_hash: string; done: boolean; started_at: string | number }>(
        `SELECT generation_id, request_hash, done, started_at FROM ${s}.idempotency_keys WHERE user_id = $1 AND key = $2`,
        [encodeKey(userId), encodeKey(key)],
      );
      const row = rows[0];
      if (!row) continue;
      const hash = decodeKey(row.request_hash);
      if (row.done) return { state: 'done', generationId: decodeKey(row.generation_id), requestHash: hash };
      return { state: 'in_progress', requestHash: hash, generationId: decodeKey(row.generation_id), startedAt: num(row.started_at) };
    }
    // The key kept changing hands: report it busy (409), which a client retries.
    return { state: 'in_progress', requestHash, generationId, startedAt: Math.trunc(now) };
  }

  async takeOver(userId: string, key: string, staleBefore: number, now: number, generationId: string): Promise<boolean> {
    const res = await this.db.query(
      `UPDATE ${this.db.s}.idempotency_keys SET started_at = $4, generation_id = $5
       WHERE user_id = $1 AND key = $2 AND NOT done AND started_at < $3`,
      [encodeKey(userId), encodeKey(key), Math.trunc(staleBefore), Math.trunc(now), encodeKey(generationId)],
    );
    return res.rowCount === 1;
  }

  async finish(userId: string, key: string, generationId: string): Promise<boolean> {
    // Only the request the record names may finish it; finishing again with the same id is a harmless retry.
    const res = await this.db.query(
      `UPDATE ${this.db.s}.idempotency_keys SET done = true WHERE user_id = $1 AND key = $2 AND generation_id = $3`,
      [encodeKey(userId), encodeKey(key), encodeKey(generationId)],
    );
    return res.rowCount === 1;
  }

  async abandon(userId: string, key: string, generationId: string): Promise<void> {
    // Only an unfinished record this request still owns: once finished, or taken over, it is someone else's answer.
    await this.db.query(
      `DELETE FROM ${this.db.s}.idempotency_keys WHERE user_id = $1 AND key = $2 AND NOT done AND generation_id = $3`,
      [encodeKey(userId), encodeKey(key), encodeKey(generationId)],
    );
  }

  async purgeBefore(before: number): Promise<number> {
    const res = await this.db.query(`DELETE FROM ${this.db.s}.idempotency_keys WHERE created_at < $1`, [Math.ceil(before)]);
    return res.rowCount ?? 0;
  }
}
