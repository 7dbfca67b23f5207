import { hashApiKey, newKeyId } from '@genservice/core/ports';
import type { ApiKeyInfo, ApiKeyStore, KeyScope, NewApiKey, Principal } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey, num, storableText, type PgStatementOptions } from './db.js';

/** How often a key's `last_used_at` is written at most: a write per request would cost more than the request. */
const LAST_USED_RESOLUTION_MS = 60_000;

const KEY_COLUMNS = 'key_id, user_id, name, scopes, models, budget_amount, budget_period, expires_at, created_at, last_used_at, max_in_flight';

interface KeyRow {
  key_id: string;
  user_id: string;
  name: string;
  scopes: string;
  models: string | null;
  budget_amount: string | null;
  budget_period: 'day' | 'month' | null;
  max_in_flight: number | null;
  expires_at: string | null;
  created_at: string;
  last_used_at: string | null;
}

/**
 * API keys on PostgreSQL, held only as SHA-256 digests. `resolve` looks the digest up through the primary key:
 * the lookup compares digests, never the key, so timing reveals nothing about how much of a key matched. Nothing
 * is cached, so a revoke is seen by every instance on its next request. A revoke sets `revoked_at` and keeps the row:
 * its digest and id stay taken, so adding the key again changes nothing.
 */
export class PostgresApiKeyStore implements ApiKeyStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
  }

  async resolve(apiKey: string, now: number = Date.now()): Promise<Principal | null> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return null;
    const { rows } = await this.db.query<KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM ${this.db.s}.api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
      [hashApiKey(apiKey)],
    );
    const row = rows[0];
    if (!row) return null;
    const key = keyOf(row);
    if (key.expiresAt !== undefined && key.expiresAt <= now) return null;
    if (key.lastUsedAt === undefined || now - key.lastUsedAt >= LAST_USED_RESOLUTION_MS) {
      // Best effort: a failed write must not turn a valid key into a failed request; the next use records it.
      await this.db
        .query(`UPDATE ${this.db.s}.api_keys SET last_used_at = $2 WHERE key_id = $1`, [row.key_id, Math.trunc(now)])
        .catch(() => undefined);
    }
    const p: Principal = { userId: key.userId, keyId: key.keyId, scopes: key.scopes };
    if (key.models !== undefined) p.models = key.models;
    if (key.budget !== undefined) p.budget = key.budget;
    if (key.maxInFlight !== undefined) p.maxInFlight = key.maxInFlight;
    if (key.expiresAt !== undefined) p.expiresAt = key.expiresAt;
    return p;
  }

  /**
   * Adding a key that already belongs to the same user is a no-op; a key that belongs to another user is
   * refused, since silently keeping or moving it would authenticate someone as the wrong user.
   */
  async addKey(apiKey: string, userId: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string.');
    const digest = hashApiKey(apiKey);
    const inserted = await this.db.query(
      `INSERT INTO ${this.db.s}.api_keys (key_hash, user_id, created_at, key_id) VALUES ($1, $2, $3, $4)
       ON CONFLICT (key_hash) DO NOTHING`,
      [digest, encodeKey(userId), Date.now(), newKeyId()],
    );
    if (inserted.rowCount === 1) return;
    // Already stored, or revoked (the row stays, revoked_at set): either way nothing changes.
    const { rows } = await this.db.query<{ user_id: string }>(
      `SELECT user_id FROM ${this.db.s}.api_keys WHERE key_hash = $1`,
      [digest],
    );
    // Deleted by hand between our insert and this read: add it again.
    if (!rows[0]) return this.addKey(apiKey, userId);
    if (rows[0].user_id !== encodeKey(userId)) throw new Error('This API key already belongs to another user.');
  }

  async createKey(apiKey: string, key: NewApiKey): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string.');
    // No ON CONFLICT: a taken digest or key id fails the insert, and nothing is written.
    await this.db.query(
      `INSERT INTO ${this.db.s}.api_keys (key_hash, ${KEY_COLUMNS})
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, $11)`,
      [
        hashApiKey(apiKey),
        encodeKey(key.keyId),
        encodeKey(key.userId),
        storableText(key.name),
        JSON.stringify(key.scopes),
        key.models !== undefined ? JSON.stringify(key.models) : null,
        key.budget?.amount ?? null,
        key.budget?.period ?? null,
        key.expiresAt ?? null,
        Math.trunc(key.createdAt),
        key.maxInFlight ?? null,
      ],
    );
  }

  async listKeys(userId: string): Promise<ApiKeyInfo[]> {
    const { rows } = await this.db.query<KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM ${this.db.s}.api_keys WHERE user_id = $1 AND revoked_at IS NULL ORDER BY created_at, ord`,
      [encodeKey(userId)],
    );
    return rows.map(keyOf);
  }

  async getKey(keyId: string): Promise<ApiKeyInfo | null> {
    const { rows } = await this.db.query<KeyRow>(
      `SELECT ${KEY_COLUMNS} FROM ${this.db.s}.api_keys WHERE key_id = $1 AND revoked_at IS NULL`,
      [encodeKey(keyId)],
    );
    return rows[0] ? keyOf(rows[0]) : null;
  }

  async revokeKey(apiKey: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return;
    await this.db.query(`UPDATE ${this.db.s}.api_keys SET revoked_at = $2 WHERE key_hash = $1 AND revoked_at IS NULL`, [
      hashApiKey(apiKey),
      Date.now(),
    ]);
  }

  async revokeKeyById(keyId: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE ${this.db.s}.api_keys SET revoked_at = $2 WHERE key_id = $1 AND revoked_at IS NULL`,
      [encodeKey(keyId), Date.now()],
    );
    return rowCount === 1;
  }
}

function keyOf(row: KeyRow): ApiKeyInfo {
  const key: ApiKeyInfo = {
    keyId: decodeKey(row.key_id),
    userId: decodeKey(row.user_id),
    name: row.name,
    scopes: JSON.parse(row.scopes) as KeyScope[],
    createdAt: num(row.created_at),
  };
  if (row.models !== null) key.models = JSON.parse(row.models) as string[];
  if (row.budget_amount !== null && row.budget_period !== null) key.budget = { amount: num(row.budget_amount), period: row.budget_period };
  if (row.max_in_flight !== null) key.maxInFlight = Number(row.max_in_flight);
  if (row.expires_at !== null) key.expiresAt = num(row.expires_at);
  if (row.last_used_at !== null) key.lastUsedAt = num(row.last_used_at);
  return key;
}
