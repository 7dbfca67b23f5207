import type { UploadRecord, UploadStore } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey, num, type PgStatementOptions } from './db.js';

/** The uploads and their expiry on PostgreSQL (`uploads` table, migration 15), for the clean-up that deletes them. */
export class PostgresUploadStore implements UploadStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
  }

  async insert(upload: UploadRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.db.s}.uploads (key, owner_id, mime_type, size, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO NOTHING`,
      [upload.key, encodeKey(upload.ownerId), upload.mimeType, upload.size, Math.trunc(upload.createdAt), Math.trunc(upload.expiresAt)],
    );
  }

  async listExpiredBefore(before: number, limit: number): Promise<UploadRecord[]> {
    // By the (expires_at, key) index: the oldest expiry first, ties by key.
    const { rows } = await this.db.query<{ key: string; owner_id: string; mime_type: string; size: string; created_at: string; expires_at: string }>(
      `SELECT key, owner_id, mime_type, size, created_at, expires_at FROM ${this.db.s}.uploads
       WHERE expires_at < $1 ORDER BY expires_at, key LIMIT $2`,
      [Math.trunc(Math.min(before, Number.MAX_SAFE_INTEGER)), Math.max(0, Math.trunc(limit))],
    );
    return rows.map((r) => ({
      key: r.key,
      ownerId: decodeKey(r.owner_id),
      mimeType: r.mime_type,
      size: num(r.size),
      createdAt: num(r.created_at),
      expiresAt: num(r.expires_at),
    }));
  }

  async remove(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.db.query(`DELETE FROM ${this.db.s}.uploads WHERE key = ANY($1::text[])`, [[...keys]]);
  }
}
