import { retryMethodsWhileBusy } from './busy.js';
import type { AccountSnapshot, Ledger, OpenReserve, ReserveResult } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

interface ReserveRow {
  user_id: string;
  amount: number;
  state: 'open' | 'settled';
  charged: number | null;
}

/** Same condition as the partial index `reserves_open`, so only open reserves are ever visited. */
export const OPEN_RESERVES_SQL = `SELECT generation_id, user_id, amount, created_at FROM reserves
  WHERE state = 'open'
  ORDER BY created_at, rowid
  LIMIT ?`;

/**
 * Ledger on SQLite, safe to share between processes.
 *
 * Each operation is one IMMEDIATE transaction: it takes the database's write lock before reading, so no other
 * connection (in this process or another) can slip a write between the check and the update. The balance test
 * itself lives in the UPDATE's WHERE (`balance >= amount`) and a CHECK constraint backs it, so even a logic
 * slip could not drive a balance below zero. `accounts` carries running totals, so `account()` is one row read.
 */
export class SqliteLedger implements Ledger {
  private readonly findReserveStmt: Statement;
  private readonly ensureAccountStmt: Statement;
  private readonly holdStmt: Statement;
  private readonly insertReserveStmt: Statement;
  private readonly closeReserveStmt: Statement;
  private readonly applySettleStmt: Statement;
  private readonly creditStmt: Statement;
  private readonly accountStmt: Statement;
  private readonly openReservesStmt: Statement;
  private readonly reserveTx: (userId: string, generationId: string, amount: number, now: number) => ReserveResult;
  private readonly settleTx: (generationId: string, amount: number) => number | null;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    this.findReserveStmt = db.prepare(
      'SELECT user_id, amount, state, charged FROM reserves WHERE generation_id = ?',
    );
    this.ensureAccountStmt = db.prepare('INSERT INTO accounts (user_id) VALUES (?) ON CONFLICT (user_id) DO NOTHING');
    this.holdStmt = db.prepare(
      `UPDATE accounts SET balance = balance - @amount, reserved = reserved + @amount
        WHERE user_id = @userId AND balance >= @amount`,
    );
    this.insertReserveStmt = db.prepare(
      `INSERT INTO reserves (generation_id, user_id, amount, state, created_at)
       VALUES (@generationId, @userId, @amount, 'open', @now)`,
    );
    this.closeReserveStmt = db.prepare(
      `UPDATE reserves SET state = 'settled', charged = @charged, settled_at = @now
        WHERE generation_id = @generationId AND state = 'open'`,
    );
    this.applySettleStmt = db.prepare(
      `UPDATE accounts
          SET reserved = reserved - @amount, settled = settled + @charged, balance = balance + (@amount - @charged)
        WHERE user_id = @userId`,
    );
    this.creditStmt = db.prepare(
      `INSERT INTO accounts (user_id, balance) VALUES (@userId, @amount)
       ON CONFLICT (user_id) DO UPDATE SET balance = balance + excluded.balance`,
    );
    this.accountStmt = db.prepare('SELECT balance, reserved, settled FROM accounts WHERE user_id = ?');
    this.openReservesStmt = db.prepare(OPEN_RESERVES_SQL);

    this.reserveTx = db
      .transaction((userId: string, generationId: string, amount: number, now: number): ReserveResult => {
        const existing = this.findReserveStmt.get(generationId) as ReserveRow | undefined;
        if (existing) {
          if (existing.user_id !== userId) {
            // Ids are random, so this is a caller bug; answering 'ok' would let one user ride on another's reserve.
            throw new Error(`Generation ${generationId} is already reserved for another user`);
          }
          // A retry of the same create: the first call already holds the amount.
          return 'ok';
        }
        // A free generation still needs an account row for the reserve's foreign key.
        if (amount === 0) this.ensureAccountStmt.run(userId);
        if (this.holdStmt.run({ userId, amount }).changes === 0) return 'insufficient';
        this.insertReserveStmt.run({ generationId, userId, amount, now });
        return 'ok';
      })
      .immediate;

    this.settleTx = db
      .transaction((generationId: string, amount: number): number | null => {
        const reserve = this.findReserveStmt.get(generationId) as ReserveRow | undefined;
        if (!reserve) return null;
        // Settled before (a retry after a crash): report the first charge, change nothing.
        if (reserve.state === 'settled') return reserve.charged ?? 0;
        const charged = Math.min(Math.max(amount, 0), reserve.amount);
        this.closeReserveStmt.run({ generationId, charged, now: Date.now() });
        this.applySettleStmt.run({ userId: reserve.user_id, amount: reserve.amount, charged });
        return charged;
      })
      .immediate;
  }

  async reserve(userId: string, generationId: string, amount: number, now: number = Date.now()): Promise<ReserveResult> {
    assertAmount(amount, 'reserve amount');
    return this.reserveTx(userId, generationId, amount, now);
  }

  async settle(generationId: string, amount: number): Promise<number | null> {
    if (!Number.isFinite(amount)) throw new RangeError(`settle amount must be a finite number, got ${amount}`);
    return this.settleTx(generationId, amount);
  }

  async release(generationId: string): Promise<number | null> {
    return this.settle(generationId, 0);
  }

  async balance(userId: string): Promise<number> {
    return (await this.account(userId)).balance;
  }

  async credit(userId: string, amount: number): Promise<void> {
    assertAmount(amount, 'credit amount');
    this.creditStmt.run({ userId, amount });
  }

  async account(userId: string): Promise<AccountSnapshot> {
    const row = this.accountStmt.get(userId) as AccountSnapshot | undefined;
    return row ? { balance: row.balance, reserved: row.reserved, settled: row.settled } : { balance: 0, reserved: 0, settled: 0 };
  }

  async openReserves(limit: number): Promise<OpenReserve[]> {
    if (!(limit > 0)) return [];
    const rows = this.openReservesStmt.all(Math.floor(limit)) as Array<{
      generation_id: string;
      user_id: string;
      amount: number;
      created_at: number;
    }>;
    return rows.map((r) => ({ generationId: r.generation_id, userId: r.user_id, amount: r.amount, createdAt: r.created_at }));
  }
}

function assertAmount(amount: number, what: string): void {
  if (!Number.isFinite(amount) || amount < 0) {
    throw new RangeError(`${what} must be a finite number >= 0, got ${amount}`);
  }
}
