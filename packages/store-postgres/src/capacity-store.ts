import { CAPACITY_WINDOW_MS, type CapacityAsk, type CapacityGrant, type CapacityLimits, type CapacityStore } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, type PgStatementOptions } from './db.js';

/**
 * Provider lanes' counters on PostgreSQL (the `capacity` service option), shared by every instance on the database.
 * An ask is one call of the schema's `capacity_acquire` function, which decides under the lane row's lock.
 */
export class PostgresCapacityStore implements CapacityStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
  }

  async acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant> {
    const { rows } = await this.db.query<{ granted: boolean; retry_after_ms: string | null }>(
      `SELECT granted, retry_after_ms FROM ${this.db.s}.capacity_acquire($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        lane,
        limits.concurrency ?? null,
        limits.requestsPerMinute ?? null,
        limits.unitsPerMinute ?? null,
        ask.permitId,
        ask.units,
        Math.trunc(ask.now),
        Math.trunc(ask.holdMs),
        CAPACITY_WINDOW_MS,
      ],
    );
    const row = rows[0]!;
    if (row.granted) return { granted: true };
    return row.retry_after_ms === null ? { granted: false } : { granted: false, retryAfterMs: Number(row.retry_after_ms) };
  }

  async release(lane: string, permitId: string, refund?: { at: number }): Promise<void> {
    await this.db.query(`DELETE FROM ${this.db.s}.capacity_permits WHERE lane = $1 AND permit_id = $2`, [lane, permitId]);
    if (refund) {
      await this.db.query(
        `DELETE FROM ${this.db.s}.capacity_requests WHERE ctid = (SELECT ctid FROM ${this.db.s}.capacity_requests WHERE lane = $1 AND permit_id = $2 AND at = $3 LIMIT 1)`,
        [lane, permitId, Math.trunc(refund.at)],
      );
    }
  }

  async pause(lane: string, until: number): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.db.s}.capacity_lanes (lane, paused_until) VALUES ($1, $2)
       ON CONFLICT (lane) DO UPDATE SET paused_until = greatest(${this.db.s}.capacity_lanes.paused_until, excluded.paused_until)`,
      [lane, Math.trunc(until)],
    );
  }
}
