import type { AccountSnapshot, Ledger, OpenReserve, ReserveResult } from '../ports/ledger.js';

export interface MemoryLedgerOptions {
  /** Starting balances by user id. */
  balances?: Record<string, number>;
}

interface Reserve {
  userId: string;
  amount: number;
  createdAt: number;
  /**
   * Set once by settle/release; every later call returns it unchanged. Present (undefined) from the start, so setting
   * it later writes a slot the object already has instead of growing it (one allocation less per generation).
   */
  charged: number | undefined;
  sequence: number;
}

/**
 * Ledger held in Maps. Each method checks and writes in one synchronous step, so concurrent reserves in one
 * process can never overdraw. Not shared between processes: use a SQL ledger for more than one instance.
 */
export class MemoryLedger implements Ledger {
  private readonly accounts = new Map<string, AccountSnapshot>();
  private readonly reserves = new Map<string, Reserve>();
  private sequence = 0;

  constructor(options: MemoryLedgerOptions = {}) {
    for (const [userId, amount] of Object.entries(options.balances ?? {})) {
      assertAmount(amount, 'balance');
      this.accountOf(userId).balance += amount;
    }
  }

  async reserve(userId: string, generationId: string, amount: number, now: number = Date.now()): Promise<ReserveResult> {
    assertAmount(amount, 'reserve amount');
    const existing = this.reserves.get(generationId);
    if (existing) {
      if (existing.userId !== userId) {
        // Ids are random, so this is a caller bug; answering 'ok' would let one user ride on another's reserve.
        throw new Error(`Generation ${generationId} is already reserved for another user`);
      }
      return 'ok';
    }
    const account = this.accountOf(userId);
    if (account.balance < amount) return 'insufficient';
    account.balance -= amount;
    account.reserved += amount;
    this.reserves.set(generationId, { userId, amount, createdAt: now, charged: undefined, sequence: this.sequence++ });
    return 'ok';
  }

  async settle(generationId: string, amount: number): Promise<number | null> {
    if (!Number.isFinite(amount)) throw new RangeError(`settle amount must be a finite number, got ${amount}`);
    const reserve = this.reserves.get(generationId);
    if (!reserve) return null;
    if (reserve.charged !== undefined) return reserve.charged;
    const charged = Math.min(Math.max(amount, 0), reserve.amount);
    const account = this.accountOf(reserve.userId);
    account.reserved -= reserve.amount;
    account.settled += charged;
    account.balance += reserve.amount - charged;
    reserve.charged = charged;
    return charged;
  }

  async release(generationId: string): Promise<number | null> {
    return this.settle(generationId, 0);
  }

  async balance(userId: string): Promise<number> {
    return this.accounts.get(userId)?.balance ?? 0;
  }

  async credit(userId: string, amount: number): Promise<void> {
    assertAmount(amount, 'credit amount');
    this.accountOf(userId).balance += amount;
  }

  async account(userId: string): Promise<AccountSnapshot> {
    const account = this.accounts.get(userId);
    return account ? { ...account } : { balance: 0, reserved: 0, settled: 0 };
  }

  async openReserves(limit: number): Promise<OpenReserve[]> {
    return [...this.reserves.entries()]
      .filter(([, r]) => r.charged === undefined)
      .sort(([, a], [, b]) => a.createdAt - b.createdAt || a.sequence - b.sequence)
      .slice(0, Math.max(0, limit))
      .map(([generationId, r]) => ({ generationId, userId: r.userId, amount: r.amount, createdAt: r.createdAt }));
  }

  private accountOf(userId: string): AccountSnapshot {
    let account = this.accounts.get(userId);
    if (!account) {
      account = { balance: 0, reserved: 0, settled: 0 };
      this.accounts.set(userId, account);
    }
    return account;
  }
}

function assertAmount(amount: number, what: string): void {
  if (!Number.isFinite(amount) || amount < 0) {
    throw new RangeError(`${what} must be a finite number >= 0, got ${amount}`);
  }
}
