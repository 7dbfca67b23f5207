/**
 * Counting a user's finished generations without replacing any method of the memory ledger: a replaced `reserve` or
 * `settle` keeps the memory store from holding the ledger's reserves in its own steps (the path a host's service
 * takes, memory/in-store-ledger.ts of core), so the bench would measure another path than a host gets. Every bench
 * generation costs 1 token: the user's settled tokens count the finished ones, and no open reserve means every
 * accepted one has finished.
 */
import type { MemoryLedger } from '@genservice/core';

export interface SettledCount {
  /** Tokens settled so far for the user (one per finished generation). */
  settled(): Promise<number>;
  /** Resolves once no reserve of the user is open, looking every millisecond. */
  idle(): Promise<void>;
}

export function settledCount(ledger: MemoryLedger, userId: string): SettledCount {
  return {
    settled: async () => (await ledger.account(userId)).settled,
    idle: async () => {
      while ((await ledger.account(userId)).reserved > 0) await new Promise((resolve) => setTimeout(resolve, 1));
    },
  };
}
