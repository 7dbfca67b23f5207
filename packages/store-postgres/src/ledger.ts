import type { AccountSnapshot, Ledger, OpenReserve, ReserveResult } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, assertAmount, decodeKey, encodeKey, num } from './db.js';

/** The ledger's statements, given the quoted schema (exported for the index tests). */
export function ledgerSql(s: string): Record<
  'insertReserve' | 'reserveOwner' | 'debit' | 'ensureAccount' | 'settle' | 'charged' | 'account' | 'credit' | 'openReserves',
  string
> {
  return {
    // The reserve row goes in first: its primary key is what makes a retried reserve idempotent. A concurrent
    // duplicate blocks on this insert until the first transaction ends, then sees its row (or, if the first
    // rolled back as insufficient, inserts its own).
    insertReserve: `INSERT INTO ${s}.reserves (generation_id, user_id, amount, created_at)
      VALUES ($1, $2, $3, $4) ON CONFLICT (generation_id) DO NOTHING`,
    reserveOwner: `SELECT user_id FROM ${s}.reserves WHERE generation_id = $1`,
    // The row lock serialises racing debits, and READ COMMITTED re-checks `balance >= $2` against the latest
    // committed balance, so the balance never goes below zero.
    debit: `UPDATE ${s}.accounts SET balance = balance - $2, reserved = reserved + $2
      WHERE user_id = $1 AND balance >= $2`,
    ensureAccount: `INSERT INTO ${s}.accounts (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`,
    // One statement: the reserve closes and the account moves together or not at all. A second settle finds
    // no open reserve (after waiting on the first one's row lock) and changes nothing.
    settle: `WITH r AS (
        UPDATE ${s}.reserves SET state = 'settled', charged = LEAST(amount, $2::numeric), settled_at = $3
        WHERE generation_id = $1 AND state = 'open'
        RETURNING user_id, amount, charged
      ), a AS (
        UPDATE ${s}.accounts acc
        SET reserved = acc.reserved - r.amount, settled = acc.settled + r.charged,
            balance = acc.balance + (r.amount - r.charged)
        FROM r WHERE acc.user_id = r.user_id
        RETURNING 1
      )
      SELECT r.charged, (SELECT count(*) FROM a)::int AS accounts FROM r`,
    charged: `SELECT charged FROM ${s}.reserves WHERE generation_id = $1`,
    account: `SELECT balance, reserved, settled FROM ${s}.accounts WHERE user_id = $1`,
    credit: `INSERT INTO ${s}.accounts (user_id, balance) VALUES ($1, $2)
      ON CONFLICT (user_id) DO UPDATE SET balance = ${s}.accounts.balance + EXCLUDED.balance`,
    openReserves: `SELECT generation_id, user_id, amount, created_at FROM ${s}.reserves
      WHERE state = 'open' ORDER BY created_at, generation_id LIMIT $1`,
  };
}

/**
 * Ledger on PostgreSQL. Accounts hold `balance` (spendable), `reserved` (held by open reserves) and `settled`
 * (charged, all time); one row per reserve records what it held and, once settled, what it charged. Every
 * movement shifts tokens between those three columns in the same transaction as the reserve row changes, so
 * `balance + reserved + settled` only changes through `credit`.
 */
export class PostgresLedger implements Ledger {
  private readonly db: PgDatabase;
  private readonly sql: ReturnType<typeof ledgerSql>;

  constructor(pool: Pool, options: { schema?: string } = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice');
    this.sql = ledgerSql(this.db.s);
  }

  async reserve(userId: string, generationId: string, amount: number, now: number = Date.now()): Promise<ReserveResult> {
    assertAmount(amount, 'amount');
    const user = encodeKey(userId);
    const gen = encodeKey(generationId);
    try {
      return await this.db.transaction<ReserveResult>(async (tx) => {
        const inserted = await tx.query(this.sql.insertReserve, [gen, user, amount, Math.trunc(now)]);
        if (inserted.rowCount === 0) {
          // Already reserved (by an earlier call or a concurrent one that committed): hold nothing more.
          const { rows } = await tx.query<{ user_id: string }>(this.sql.reserveOwner, [gen]);
          if (rows[0] && rows[0].user_id !== user) {
            // Ids are random, so this is a caller bug; 'ok' would let one user ride on another's reserve.
            throw new Error(`Generation ${generationId} is already reserved for another user`);
          }
          return 'ok';
        }
        // A free generation needs no funds, but its settle still moves (zero) tokens through the account row.
        if (amount === 0) await tx.query(this.sql.ensureAccount, [user]);
        const debited = await tx.query(this.sql.debit, [user, amount]);
        if (debited.rowCount === 1) return 'ok';
        // Roll the reserve row back with the transaction, so a later retry with more funds can reserve.
        throw new Insufficient();
      });
    } catch (err) {
      if (err instanceof Insufficient) return 'insufficient';
      throw err;
    }
  }

  async settle(generationId: string, amount: number): Promise<number | null> {
    if (typeof amount !== 'number' || !Number.isFinite(amount)) {
      throw new RangeError(`settle amount must be a finite number, got ${String(amount)}`);
    }
    // Clamped to [0, reserve]: below zero would credit the user, above the reserve would break the invariant.
    const charge = Math.max(0, amount);
    const { rows } = await this.db.query<{ charged: string }>(this.sql.settle, [encodeKey(generationId), charge, Date.now()]);
    if (rows[0]) return num(rows[0].charged);
    const prior = await this.db.query<{ charged: string | null }>(this.sql.charged, [encodeKey(generationId)]);
    const row = prior.rows[0];
    if (!row) return null;
    // Still open here means a concurrent settle is mid-flight; its charge is not known yet, so report ours.
    return row.charged === null ? charge : num(row.charged);
  }

  async release(generationId: string): Promise<number | null> {
    return this.settle(generationId, 0);
  }

  async balance(userId: string): Promise<number> {
    return (await this.account(userId)).balance;
  }

  async credit(userId: string, amount: number): Promise<void> {
    assertAmount(amount, 'amount');
    await this.db.query(this.sql.credit, [encodeKey(userId), amount]);
  }

  async account(userId: string): Promise<AccountSnapshot> {
    const { rows } = await this.db.query(this.sql.account, [encodeKey(userId)]);
    const row = rows[0];
    if (!row) return { balance: 0, reserved: 0, settled: 0 };
    return { balance: num(row.balance), reserved: num(row.reserved), settled: num(row.settled) };
  }

  async openReserves(limit: number): Promise<OpenReserve[]> {
    const { rows } = await this.db.query(this.sql.openReserves, [limit]);
    return rows.map((r) => ({
      generationId: decodeKey(String(r.generation_id)),
      userId: decodeKey(String(r.user_id)),
      amount: num(r.amount),
      createdAt: num(r.created_at),
    }));
  }
}

/** Internal signal to roll back a reserve whose debit found too little balance. */
class Insufficient extends Error {
  override readonly name = 'Insufficient' as const;
}
