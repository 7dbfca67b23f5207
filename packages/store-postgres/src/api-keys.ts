import { hashApiKey } from '@genservice/core/ports';
import type { ApiKeyStore, Principal } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey } from './db.js';

/**
 * API keys on PostgreSQL, held only as SHA-256 digests. `resolve` looks the digest up through the primary key:
 * the lookup compares digests, never the key, so timing reveals nothing about how much of a key matched. Nothing
 * is cached, so a revoke (a delete) is seen by every instance on its next request.
 */
export class PostgresApiKeyStore implements ApiKeyStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice');
  }

  async resolve(apiKey: string): Promise<Principal | null> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return null;
    const { rows } = await this.db.query<{ user_id: string }>(
      `SELECT user_id FROM ${this.db.s}.api_keys WHERE key_hash = $1`,
      [hashApiKey(apiKey)],
    );
    return rows[0] ? { userId: decodeKey(rows[0].user_id) } : null;
  }

  /**
   * Adding a key that already belongs to the same user is a no-op; a key that belongs to another user is
   * refused, since silently keeping or moving it would authenticate someone as the wrong user.
   */
  async addKey(apiKey: string, userId: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string.');
    const digest = hashApiKey(apiKey);
    const inserted = await this.db.query(
      `INSERT INTO ${this.db.s}.api_keys (key_hash, user_id, created_at) VALUES ($1, $2, $3)
       ON CONFLICT (key_hash) DO NOTHING`,
      [digest, encodeKey(userId), Date.now()],
    );
    if (inserted.rowCount === 1) return;
    const { rows } = await this.db.query<{ user_id: string }>(
      `SELECT user_id FROM ${this.db.s}.api_keys WHERE key_hash = $1`,
      [digest],
    );
    // Revoked between our insert and this read: add it again.
    if (!rows[0]) return this.addKey(apiKey, userId);
    if (rows[0].user_id !== encodeKey(userId)) throw new Error('This API key already belongs to another user.');
  }

  async revokeKey(apiKey: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return;
    await this.db.query(`DELETE FROM ${this.db.s}.api_keys WHERE key_hash = $1`, [hashApiKey(apiKey)]);
  }
}
