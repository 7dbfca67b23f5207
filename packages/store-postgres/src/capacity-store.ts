import { CAPACITY_WINDOW_MS, LANE_WAITER_TTL_MS, laneTurnCost, type CapacityAsk, type CapacityGrant, type CapacityLimits, type CapacityStore } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, type PgStatementOptions } from './db.js';

/**
 * Provider lanes' counters on PostgreSQL (the `capacity` service option), shared by every instance on the database.
 * An ask is one call of the schema's `capacity_acquire` function, which decides under the lane row's lock (an ask
 * with `fair` takes the lane's turns there too: migrations 17 and 18 mirror `laneTurn` of @genservice/core).
 */
export class PostgresCapacityStore implements CapacityStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
  }

  async acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant> {
    const { rows } = await this.db.query<{ granted: boolean; retry_after_ms: string | null }>(
      `SELECT granted, retry_after_ms FROM ${this.db.s}.capacity_acquire($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
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
        ask.fair?.tenant ?? null,
        ask.fair ? laneTurnCost(ask.fair.weight) : null,
        ask.fair?.waiter ?? null,
        LANE_WAITER_TTL_MS,
      ],
    );
    const row = rows[0]!;
    if (row.granted) return { granted: true };
    return row.retry_after_ms === null ? { granted: false } : { granted: false, retryAfterMs: Number(row.retry_after_ms) };
  }

  async release(lane: string, permitId: string, refund?: { at: number }): Promise<void> {
    await this.db.query(`SELECT ${this.db.s}.capacity_release($1, $2, $3)`, [lane, permitId, refund ? Math.trunc(refund.at) : null]);
  }

  async pause(lane: string, until: number): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.db.s}.capacity_lanes (lane, paused_until) VALUES ($1, $2)
       ON CONFLICT (lane) DO UPDATE SET paused_until = greatest(${this.db.s}.capacity_lanes.paused_until, excluded.paused_until)`,
      [lane, Math.trunc(until)],
    );
  }
}
