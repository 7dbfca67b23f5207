import type { UploadRecord, UploadStore } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import { retryMethodsWhileBusy } from './busy.js';
import type { SqliteDatabase } from './database.js';

interface UploadRow {
  key: string;
  owner_id: string;
  mime_type: string;
  size: number;
  created_at: number;
  expires_at: number;
}

/** Every statement the store runs; exported from this module (not the package) so tests can read them. */
export const UPLOAD_SQL = {
  insert: `INSERT INTO uploads (key, owner_id, mime_type, size, created_at, expires_at)
     VALUES (@key, @ownerId, @mimeType, @size, @createdAt, @expiresAt)
     ON CONFLICT (key) DO NOTHING`,
  // By the (expires_at, key) index: the oldest expiry first, ties by key.
  expired: `SELECT key, owner_id, mime_type, size, created_at, expires_at FROM uploads
     WHERE expires_at < ? ORDER BY expires_at, key LIMIT ?`,
  remove: 'DELETE FROM uploads WHERE key = ?',
} as const;

/** The uploads and their expiry on SQLite (`uploads` table, migration 17), for the clean-up that deletes them. */
export class SqliteUploadStore implements UploadStore {
  private readonly insertStmt: Database.Statement;
  private readonly expiredStmt: Database.Statement;
  private readonly removeTx: (keys: readonly string[]) => void;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    this.insertStmt = db.prepare(UPLOAD_SQL.insert);
    this.expiredStmt = db.prepare(UPLOAD_SQL.expired);
    const removeStmt = db.prepare(UPLOAD_SQL.remove);
    this.removeTx = db.transaction((keys: readonly string[]) => {
      for (const key of keys) removeStmt.run(key);
    }).immediate;
  }

  async insert(upload: UploadRecord): Promise<void> {
    this.insertStmt.run({ ...upload });
  }

  async listExpiredBefore(before: number, limit: number): Promise<UploadRecord[]> {
    const rows = this.expiredStmt.all(before, Math.max(0, Math.trunc(limit))) as UploadRow[];
    return rows.map((r) => ({ key: r.key, ownerId: r.owner_id, mimeType: r.mime_type, size: r.size, createdAt: r.created_at, expiresAt: r.expires_at }));
  }

  async remove(keys: readonly string[]): Promise<void> {
    if (keys.length > 0) this.removeTx(keys);
  }
}
