import {
  CAPACITY_WINDOW_MS,
  laneTurn,
  laneTurnCost,
  waiterUntil,
  type CapacityAsk,
  type CapacityFairness,
  type CapacityGrant,
  type CapacityLimits,
  type CapacityStore,
} from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import { retryMethodsWhileBusy } from './busy.js';
import type { SqliteDatabase } from './database.js';

type Turn = { granted: false; retryAfterMs?: number } | { granted: true; paid: { tenant: string; cost: number } };

/**
 * Provider lanes' counters on SQLite (the `capacity` service option): every process sharing the file shares the
 * limits. Each ask is one IMMEDIATE transaction, so racing asks are decided one after the other. An ask with `fair`
 * takes the lane's turns in the same transaction (`laneTurn` of @genservice/core, over the tables of migration 19).
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
    const record = db.prepare('INSERT INTO capacity_requests (lane, at, units, permit_id, tenant, cost) VALUES (?, ?, ?, ?, ?, ?)');
    const free = db.prepare('DELETE FROM capacity_permits WHERE lane = ? AND permit_id = ?');
    const refunded = db.prepare('SELECT rowid AS id, tenant, cost FROM capacity_requests WHERE lane = ? AND permit_id = ? AND at = ? LIMIT 1');
    const refund = db.prepare('DELETE FROM capacity_requests WHERE rowid = ?');
    const giveBack = db.prepare('UPDATE capacity_tenants SET vt = vt - ? WHERE lane = ? AND tenant = ?');
    this.pauseStmt = db.prepare(
      'INSERT INTO capacity_lanes (lane, paused_until) VALUES (?, ?) ON CONFLICT (lane) DO UPDATE SET paused_until = max(paused_until, excluded.paused_until)',
    );
    const turn = this.turns(db);
    const limitsRefuse = (lane: string, limits: CapacityLimits, ask: CapacityAsk): CapacityGrant | undefined => {
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
      return undefined;
    };
    const decide = db.transaction((lane: string, limits: CapacityLimits, ask: CapacityAsk): CapacityGrant => {
      const refusal = limitsRefuse(lane, limits, ask);
      let paid: { tenant: string; cost: number } | undefined;
      if (ask.fair) {
        const t = turn(lane, ask.fair, ask.now, refusal);
        if (!t.granted) return t;
        paid = t.paid;
      } else if (refusal) return refusal;
      hold.run(lane, ask.permitId, ask.now + ask.holdMs);
      record.run(lane, ask.now, ask.units, ask.permitId, paid?.tenant ?? null, paid?.cost ?? null);
      return { granted: true };
    });
    this.decide = (lane, limits, ask) => decide.immediate(lane, limits, ask);
    const releaseTx = db.transaction((lane: string, permitId: string, at?: { at: number }) => {
      free.run(lane, permitId);
      if (!at) return;
      const r = refunded.get(lane, permitId, at.at) as { id: number; tenant: string | null; cost: number | null } | undefined;
      if (!r) return;
      refund.run(r.id);
      // The turn was never used either: its tenant's virtual time goes back.
      if (r.tenant !== null && r.cost !== null) giveBack.run(r.cost, lane, r.tenant);
    });
    this.releaseTx = (lane, permitId, at) => releaseTx.immediate(lane, permitId, at);
  }

  /** The lane's turns for a fair ask (`laneTurn`), run inside `decide`'s transaction. */
  private turns(db: SqliteDatabase): (lane: string, fair: CapacityFairness, now: number, refusal: CapacityGrant | undefined) => Turn {
    const expired = db.prepare('SELECT tenant, count(*) AS n FROM capacity_waiters WHERE lane = ? AND until <= ? GROUP BY tenant');
    const dropExpired = db.prepare('DELETE FROM capacity_waiters WHERE lane = ? AND until <= ?');
    const addWaiting = db.prepare('UPDATE capacity_tenants SET waiting = waiting + ? WHERE lane = ? AND tenant = ?');
    const floorOf = db.prepare('SELECT fair_floor FROM capacity_lanes WHERE lane = ?');
    const tenantOf = db.prepare('SELECT vt, waiting FROM capacity_tenants WHERE lane = ? AND tenant = ?');
    const lowestOther = db.prepare('SELECT min(vt) AS v FROM capacity_tenants WHERE lane = ? AND waiting > 0 AND tenant <> ?');
    const setFloor = db.prepare('INSERT INTO capacity_lanes (lane, fair_floor) VALUES (?, ?) ON CONFLICT (lane) DO UPDATE SET fair_floor = excluded.fair_floor');
    const forgetLevel = db.prepare('DELETE FROM capacity_tenants WHERE lane = ? AND waiting = 0 AND vt <= ?');
    const setVt = db.prepare('INSERT INTO capacity_tenants (lane, tenant, vt) VALUES (?, ?, ?) ON CONFLICT (lane, tenant) DO UPDATE SET vt = excluded.vt');
    const waiterOf = db.prepare('SELECT tenant FROM capacity_waiters WHERE lane = ? AND waiter = ?');
    const dropWaiter = db.prepare('DELETE FROM capacity_waiters WHERE lane = ? AND waiter = ?');
    const touchWaiter = db.prepare('UPDATE capacity_waiters SET until = ? WHERE lane = ? AND waiter = ?');
    const putWaiter = db.prepare('INSERT INTO capacity_waiters (lane, waiter, tenant, until) VALUES (?, ?, ?, ?)');
    return (lane, fair, now, refusal) => {
      const gone = expired.all(lane, now) as Array<{ tenant: string; n: number }>;
      if (gone.length > 0) {
        dropExpired.run(lane, now);
        for (const g of gone) addWaiting.run(-g.n, lane, g.tenant);
      }
      const floor = (floorOf.get(lane) as { fair_floor: number } | undefined)?.fair_floor ?? 0;
      const own = tenantOf.get(lane, fair.tenant) as { vt: number; waiting: number } | undefined;
      const lowest = (lowestOther.get(lane, fair.tenant) as { v: number | null }).v;
      const decided = laneTurn({ floor, vt: own?.vt, live: (own?.waiting ?? 0) > 0, lowestOther: lowest ?? undefined });
      if (decided.floor > floor) {
        setFloor.run(lane, decided.floor);
        forgetLevel.run(lane, decided.floor);
      }
      const was = waiterOf.get(lane, fair.waiter) as { tenant: string } | undefined;
      const refused: CapacityGrant | undefined = refusal ?? (decided.owed ? undefined : { granted: false });
      if (refused && !refused.granted && was?.tenant === fair.tenant) {
        // The common case, a waiter asking again: its tenant is live (its time unchanged), only its time to live moves.
        touchWaiter.run(waiterUntil(now, refused.retryAfterMs), lane, fair.waiter);
        return refused;
      }
      if (was) {
        dropWaiter.run(lane, fair.waiter);
        addWaiting.run(-1, lane, was.tenant);
      }
      if (refused && !refused.granted) {
        setVt.run(lane, fair.tenant, decided.vt);
        putWaiter.run(lane, fair.waiter, fair.tenant, waiterUntil(now, refused.retryAfterMs));
        addWaiting.run(1, lane, fair.tenant);
        return refused;
      }
      const cost = laneTurnCost(fair.weight);
      setVt.run(lane, fair.tenant, decided.vt + cost);
      return { granted: true, paid: { tenant: fair.tenant, cost } };
    };
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
