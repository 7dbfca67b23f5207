import { retryMethodsWhileBusy } from './busy.js';
import { hashApiKey } from '@genservice/core/ports';
import type { ApiKeyStore, Principal } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

/**
 * API keys on SQLite, held only as SHA-256 hex digests.
 *
 * `resolve` looks the digest up through the primary-key index: the digest of a near-miss shares nothing
 * with the real one, so the lookup time says nothing about how much of a key matched. There is no cache:
 * every `resolve` reads the table, so a revoke (a DELETE) takes effect on the next request, in every process.
 */
export class SqliteApiKeyStore implements ApiKeyStore {
  private readonly findStmt: Statement;
  private readonly insertStmt: Statement;
  private readonly deleteStmt: Statement;
  private readonly addTx: (digest: string, userId: string) => void;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    this.findStmt = db.prepare('SELECT user_id FROM api_keys WHERE digest = ?');
    this.insertStmt = db.prepare(
      'INSERT INTO api_keys (digest, user_id, created_at) VALUES (?, ?, ?) ON CONFLICT (digest) DO NOTHING',
    );
    this.deleteStmt = db.prepare('DELETE FROM api_keys WHERE digest = ?');
    this.addTx = db.transaction((digest: string, userId: string): void => {
      if (this.insertStmt.run(digest, userId, Date.now()).changes === 1) return;
      const owner = (this.findStmt.get(digest) as { user_id: string } | undefined)?.user_id;
      if (owner !== undefined && owner !== userId) {
        // Re-pointing a key would hand one user's credential to another.
        throw new Error('This API key already belongs to another user');
      }
    }).immediate;
  }

  async resolve(apiKey: string): Promise<Principal | null> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return null;
    const row = this.findStmt.get(hashApiKey(apiKey)) as { user_id: string } | undefined;
    return row ? { userId: row.user_id } : null;
  }

  async addKey(apiKey: string, userId: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) throw new RangeError('An API key must be a non-empty string');
    this.addTx(hashApiKey(apiKey), userId);
  }

  async revokeKey(apiKey: string): Promise<void> {
    if (typeof apiKey !== 'string' || apiKey.length === 0) return;
    this.deleteStmt.run(hashApiKey(apiKey));
  }
}
