import { CAPACITY_WINDOW_MS, type CapacityAsk, type CapacityGrant, type CapacityLimits, type CapacityStore } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import { retryMethodsWhileBusy } from './busy.js';
import type { SqliteDatabase } from './database.js';

/**
 * Provider lanes' counters on SQLite (the `capacity` service option): every process sharing the file shares the
 * limits. Each ask is one IMMEDIATE transaction, so racing asks are decided one after the other.
 */
export class SqliteCapacityStore implements CapacityStore {
  private readonly decide: (lane: string, limits: CapacityLimits, ask: CapacityAsk) => CapacityGrant;
  private readonly releaseTx: (lane: string, permitId: string, refund?: { at: number }) => void;
  private readonly pauseStmt: Database.Statement;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    const paused = db.prepare('SELECT paused_until FROM capacity_lanes WHERE lane = ?');
    const expire = db.prepare('DELETE FROM capacity_permits WHERE lane = ? AND expires_at <= ?');
    const others = db.prepare('SELECT count(*) AS n FROM capacity_permits WHERE lane = ? AND permit_id <> ?');
    const forget = db.prepare('DELETE FROM capacity_requests WHERE lane = ? AND at <= ?');
    const window = db.prepare('SELECT count(*) AS n, coalesce(sum(units), 0) AS units, min(at) AS oldest FROM capacity_requests WHERE lane = ?');
    const hold = db.prepare(
      'INSERT INTO capacity_permits (lane, permit_id, expires_at) VALUES (?, ?, ?) ON CONFLICT (lane, permit_id) DO UPDATE SET expires_at = excluded.expires_at',
    );
    const record = db.prepare('INSERT INTO capacity_requests (lane, at, units, permit_id) VALUES (?, ?, ?, ?)');
    const free = db.prepare('DELETE FROM capacity_permits WHERE lane = ? AND permit_id = ?');
    const refund = db.prepare('DELETE FROM capacity_requests WHERE rowid = (SELECT rowid FROM capacity_requests WHERE lane = ? AND permit_id = ? AND at = ? LIMIT 1)');
    this.pauseStmt = db.prepare(
      'INSERT INTO capacity_lanes (lane, paused_until) VALUES (?, ?) ON CONFLICT (lane) DO UPDATE SET paused_until = max(paused_until, excluded.paused_until)',
    );
    const decide = db.transaction((lane: string, limits: CapacityLimits, ask: CapacityAsk): CapacityGrant => {
      const { now } = ask;
      const p = paused.get(lane) as { paused_until: number } | undefined;
      if (p && p.paused_until > now) return { granted: false, retryAfterMs: p.paused_until - now };
      expire.run(lane, now);
      if (limits.concurrency !== undefined && (others.get(lane, ask.permitId) as { n: number }).n >= limits.concurrency) return { granted: false };
      forget.run(lane, now - CAPACITY_WINDOW_MS);
      const w = window.get(lane) as { n: number; units: number; oldest: number | null };
      const wait = w.oldest === null ? 0 : w.oldest + CAPACITY_WINDOW_MS - now;
      if (limits.requestsPerMinute !== undefined && w.n >= limits.requestsPerMinute) return { granted: false, retryAfterMs: wait };
      if (limits.unitsPerMinute !== undefined && w.units > 0 && w.units + ask.units > limits.unitsPerMinute) return { granted: false, retryAfterMs: wait };
      hold.run(lane, ask.permitId, now + ask.holdMs);
      record.run(lane, now, ask.units, ask.permitId);
      return { granted: true };
    });
    this.decide = (lane, limits, ask) => decide.immediate(lane, limits, ask);
    const releaseTx = db.transaction((lane: string, permitId: string, at?: { at: number }) => {
      free.run(lane, permitId);
      if (at) refund.run(lane, permitId, at.at);
    });
    this.releaseTx = (lane, permitId, at) => releaseTx.immediate(lane, permitId, at);
  }

  async acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant> {
    return this.decide(lane, limits, ask);
  }

  async release(lane: string, permitId: string, refund?: { at: number }): Promise<void> {
    this.releaseTx(lane, permitId, refund);
  }

  async pause(lane: string, until: number): Promise<void> {
    this.pauseStmt.run(lane, until);
  }
}
