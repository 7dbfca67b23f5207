import type { IdempotencyBegin, IdempotencyStore } from '@genservice/core';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

/**
 * Idempotency-Key records on SQLite, keyed by (user_id, key) so two users' keys never collide.
 *
 * `begin` inserts with ON CONFLICT DO NOTHING: the primary key decides, so of concurrent calls (in any process)
 * exactly one inserts and gets `new`. The read of the existing record runs in the same IMMEDIATE transaction,
 * so an `abandon` from another process cannot fall between the two.
 */
export class SqliteIdempotencyStore implements IdempotencyStore {
  private readonly insertStmt: Statement;
  private readonly findStmt: Statement;
  private readonly finishStmt: Statement;
  private readonly abandonStmt: Statement;
  private readonly purgeStmt: Statement;
  private readonly beginTx: (userId: string, key: string, requestHash: string, now: number) => IdempotencyBegin;

  constructor(db: SqliteDatabase) {
    this.insertStmt = db.prepare(
      `INSERT INTO idempotency_keys (user_id, key, request_hash, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (user_id, key) DO NOTHING`,
    );
    this.findStmt = db.prepare(
      'SELECT request_hash, generation_id FROM idempotency_keys WHERE user_id = ? AND key = ?',
    );
    // The first finish wins: a later one must not re-point a key a client may already have seen answered.
    this.finishStmt = db.prepare(
      'UPDATE idempotency_keys SET generation_id = ? WHERE user_id = ? AND key = ? AND generation_id IS NULL',
    );
    // A finished key stays: forgetting it would let a retry create a second generation.
    this.abandonStmt = db.prepare(
      'DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND generation_id IS NULL',
    );
    this.purgeStmt = db.prepare('DELETE FROM idempotency_keys WHERE created_at < ?');
    this.beginTx = db.transaction((userId: string, key: string, requestHash: string, now: number): IdempotencyBegin => {
      if (this.insertStmt.run(userId, key, requestHash, now).changes === 1) return { state: 'new' };
      const row = this.findStmt.get(userId, key) as { request_hash: string; generation_id: string | null };
      return row.generation_id === null
        ? { state: 'in_progress', requestHash: row.request_hash }
        : { state: 'done', generationId: row.generation_id, requestHash: row.request_hash };
    }).immediate;
  }

  async begin(userId: string, key: string, requestHash: string, now: number): Promise<IdempotencyBegin> {
    return this.beginTx(userId, key, requestHash, now);
  }

  async finish(userId: string, key: string, generationId: string): Promise<void> {
    this.finishStmt.run(generationId, userId, key);
  }

  async abandon(userId: string, key: string): Promise<void> {
    this.abandonStmt.run(userId, key);
  }

  async purgeBefore(before: number): Promise<number> {
    return this.purgeStmt.run(before).changes;
  }
}
