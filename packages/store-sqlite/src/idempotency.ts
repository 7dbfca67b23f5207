import { retryMethodsWhileBusy } from './busy.js';
import type { IdempotencyBegin, IdempotencyStore } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

interface KeyRow {
  request_hash: string;
  generation_id: string;
  done: 0 | 1;
  started_at: number;
}

/** Every statement the store runs; exported from this module (not the package) so tests can read them. */
export const IDEMPOTENCY_SQL = {
  insert: `INSERT INTO idempotency_keys (user_id, key, request_hash, generation_id, done, started_at, created_at)
     VALUES (@userId, @key, @requestHash, @generationId, 0, @now, @now)
     ON CONFLICT (user_id, key) DO NOTHING`,
  find: 'SELECT request_hash, generation_id, done, started_at FROM idempotency_keys WHERE user_id = ? AND key = ?',
  // Stale = unfinished and begun before `staleBefore`; the new clock makes every other racing takeover miss.
  takeOver: `UPDATE idempotency_keys SET generation_id = @generationId, started_at = @now
     WHERE user_id = @userId AND key = @key AND done = 0 AND started_at < @staleBefore`,
  // Only the attempt the record still names may finish it; finishing a finished record again with the same id
  // matches (a harmless retry) and changes nothing, so a finished record never changes.
  finish: `UPDATE idempotency_keys SET done = 1
     WHERE user_id = @userId AND key = @key AND generation_id = @generationId`,
  // A finished key stays (forgetting it would let a retry create a second generation), and so does a key another
  // request took over: it is that request's to finish or abandon.
  abandon: `DELETE FROM idempotency_keys
     WHERE user_id = @userId AND key = @key AND done = 0 AND generation_id = @generationId`,
  purge: 'DELETE FROM idempotency_keys WHERE created_at < ?',
} as const;

/**
 * Idempotency-Key records on SQLite, keyed by (user_id, key) so two users' keys never collide.
 *
 * Each change is one conditional statement, so of racing callers in any process exactly one matches the row:
 * `begin` inserts with ON CONFLICT DO NOTHING (the primary key decides who gets `new`), `takeOver` and `finish`
 * are UPDATEs conditional on the record's state and the generation it names, `abandon` a conditional DELETE.
 * `begin` reads the existing record in the same IMMEDIATE transaction as its insert, so no `abandon` or
 * `takeOver` from another process can fall between the two.
 */
export class SqliteIdempotencyStore implements IdempotencyStore {
  private readonly takeOverStmt: Statement;
  private readonly finishStmt: Statement;
  private readonly abandonStmt: Statement;
  private readonly purgeStmt: Statement;
  private readonly beginTx: (userId: string, key: string, requestHash: string, now: number, generationId: string) => IdempotencyBegin;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    const insertStmt = db.prepare(IDEMPOTENCY_SQL.insert);
    const findStmt = db.prepare(IDEMPOTENCY_SQL.find);
    this.takeOverStmt = db.prepare(IDEMPOTENCY_SQL.takeOver);
    this.finishStmt = db.prepare(IDEMPOTENCY_SQL.finish);
    this.abandonStmt = db.prepare(IDEMPOTENCY_SQL.abandon);
    this.purgeStmt = db.prepare(IDEMPOTENCY_SQL.purge);
    this.beginTx = db.transaction(
      (userId: string, key: string, requestHash: string, now: number, generationId: string): IdempotencyBegin => {
        if (insertStmt.run({ userId, key, requestHash, generationId, now }).changes === 1) return { state: 'new' };
        const row = findStmt.get(userId, key) as KeyRow;
        return row.done === 1
          ? { state: 'done', generationId: row.generation_id, requestHash: row.request_hash }
          : { state: 'in_progress', requestHash: row.request_hash, generationId: row.generation_id, startedAt: row.started_at };
      },
    ).immediate;
  }

  async begin(userId: string, key: string, requestHash: string, now: number, generationId: string): Promise<IdempotencyBegin> {
    return this.beginTx(userId, key, requestHash, now, generationId);
  }

  async takeOver(userId: string, key: string, staleBefore: number, now: number, generationId: string): Promise<boolean> {
    return this.takeOverStmt.run({ userId, key, staleBefore, now, generationId }).changes === 1;
  }

  async finish(userId: string, key: string, generationId: string): Promise<boolean> {
    return this.finishStmt.run({ userId, key, generationId }).changes === 1;
  }

  async abandon(userId: string, key: string, generationId: string): Promise<void> {
    this.abandonStmt.run({ userId, key, generationId });
  }

  async purgeBefore(before: number): Promise<number> {
    return this.purgeStmt.run(before).changes;
  }
}
