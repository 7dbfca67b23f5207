import { retryMethodsWhileBusy } from './busy.js';
import { hashApiKey, newKeyId } from '@genservice/core/ports';
import type { ApiKeyInfo, ApiKeyStore, KeyScope, NewApiKey, Principal } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

/** How often a key's `last_used_at` is written at most: a write per request would cost more than the request. */
const LAST_USED_RESOLUTION_MS = 60_000;

interface KeyRow {
  key_id: string;
  user_id: string;
  name: string;
  scopes: string;
  models: string | null;
  budget_amount: number | null;
  budget_period: 'day' | 'month' | null;
  max_in_flight: number | null;
  expires_at: number | null;
  created_at: number;
  last_used_at: number | null;
}

const KEY_COLUMNS = 'key_id, user_id, name, scopes, models, budget_amount, budget_period, expires_at, created_at, last_used_at, max_in_flight';

/**
 * API keys on SQLite, held only as SHA-256 hex digests.
 *
 * `resolve` looks the digest up through the primary-key index: the digest of a near-miss shares nothing
 * with the real one, so the lookup time says nothing about how much of a key matched. There is no cache:
 * every `resolve` reads the table, so a revoke takes effect on the next request, in every process. A revoke sets
 * `revoked_at` and keeps the row: its digest and id stay taken, so adding the key again changes nothing.
 */
export class SqliteApiKeyStore implements ApiKeyStore {
  private readonly findStmt: Statement;
  private readonly resolveStmt: Statement;
  private readonly touchStmt: Statement;
  private readonly insertStmt: Statement;
  private readonly createStmt: Statement;
  private readonly revokeStmt: Statement;
  private readonly revokeByIdStmt: Statement;
  private readonly listStmt: Statement;
  private readonly getStmt: Statement;
  private readonly addTx: (digest: string, userId: string) => void;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    this.findStmt = db.prepare('SELECT user_id FROM api_keys WHERE digest = ?');
    this.resolveStmt = db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE digest = ? AND revoked_at IS NULL`);
    this.touchStmt = db.prepare('UPDATE api_keys SET last_used_at = ? WHERE key_id = ?');
    this.insertStmt = db.prepare(
      'INSERT INTO api_keys (digest, user_id, created_at, key_id) VALUES (?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING',
    );
    // No ON CONFLICT: a taken digest or key id fails the insert, and nothing is written.
    this.createStmt = db.prepare(
      `INSERT INTO api_keys (digest, ${KEY_COLUMNS})
       VALUES (@digest, @keyId, @userId, @name, @scopes, @models, @budgetAmount, @budgetPeriod, @expiresAt, @createdAt, NULL, @maxInFlight)`,
    );
    this.revokeStmt = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE digest = ? AND revoked_at IS NULL');
    this.revokeByIdStmt = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL');
    this.listStmt = db.prepare(
      `SELECT ${KEY_COLUMNS} FROM api_keys WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at, rowid`,
    );
    this.getStmt = db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_id = ? AND revoked_at IS NULL`);
    this.addTx = db.transaction((digest: string, userId: string): void => {
      if (this.insertStmt.run(digest, userId, Date.now(), newKeyId()).changes === 1) return;
      // Already stored, or revoked (the row stays, revoked_at set): either way nothing changes.
      const owner = (this.findStmt.get(digest) as { user_id: string } | undefined)?.user_id;
      if (owner !== undefined && owner !== userId) {
        // Re-pointing a key would hand one user's credential to another.
        throw new Error('This API key already belongs to another user');
      }
    }).immediate;
  }

  async resolve(apiKey: string, now: number = Date.now()): Promise<Principal | null> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return null;
    const row = this.resolveStmt.get(hashApiKey(apiKey)) as KeyRow | undefined;
    if (!row) return null;
    if (row.expires_at !== null && row.expires_at <= now) return null;
    if (row.last_used_at === null || now - row.last_used_at >= LAST_USED_RESOLUTION_MS) {
      try {
        this.touchStmt.run(now, row.key_id);
      } catch {
        // Best effort: a busy database must not turn a valid key into a failed request; the next use records it.
      }
    }
    const key = keyOf(row);
    const p: Principal = { userId: key.userId, keyId: key.keyId, scopes: key.scopes };
    if (key.models !== undefined) p.models = key.models;
    if (key.budget !== undefined) p.budget = key.budget;
    if (key.maxInFlight !== undefined) p.maxInFlight = key.maxInFlight;
    if (key.expiresAt !== undefined) p.expiresAt = key.expiresAt;
    return p;
  }

  async addKey(apiKey: string, userId: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string');
    this.addTx(hashApiKey(apiKey), userId);
  }

  async createKey(apiKey: string, key: NewApiKey): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string');
    this.createStmt.run({
      digest: hashApiKey(apiKey),
      keyId: key.keyId,
      userId: key.userId,
      name: key.name,
      scopes: JSON.stringify(key.scopes),
      models: key.models !== undefined ? JSON.stringify(key.models) : null,
      budgetAmount: key.budget?.amount ?? null,
      budgetPeriod: key.budget?.period ?? null,
      maxInFlight: key.maxInFlight ?? null,
      expiresAt: key.expiresAt ?? null,
      createdAt: key.createdAt,
    });
  }

  async listKeys(userId: string): Promise<ApiKeyInfo[]> {
    return (this.listStmt.all(userId) as KeyRow[]).map(keyOf);
  }

  async getKey(keyId: string): Promise<ApiKeyInfo | null> {
    const row = this.getStmt.get(keyId) as KeyRow | undefined;
    return row ? keyOf(row) : null;
  }

  async revokeKey(apiKey: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return;
    this.revokeStmt.run(Date.now(), hashApiKey(apiKey));
  }

  async revokeKeyById(keyId: string): Promise<boolean> {
    return this.revokeByIdStmt.run(Date.now(), keyId).changes === 1;
  }
}

function keyOf(row: KeyRow): ApiKeyInfo {
  const key: ApiKeyInfo = {
    keyId: row.key_id,
    userId: row.user_id,
    name: row.name,
    scopes: JSON.parse(row.scopes) as KeyScope[],
    createdAt: row.created_at,
  };
  if (row.models !== null) key.models = JSON.parse(row.models) as string[];
  if (row.budget_amount !== null && row.budget_period !== null) key.budget = { amount: row.budget_amount, period: row.budget_period };
  if (row.max_in_flight !== null) key.maxInFlight = row.max_in_flight;
  if (row.expires_at !== null) key.expiresAt = row.expires_at;
  if (row.last_used_at !== null) key.lastUsedAt = row.last_used_at;
  return key;
}
