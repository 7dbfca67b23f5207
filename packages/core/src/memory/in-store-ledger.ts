import type { ReserveOptions, ReserveOutcome, ReserveResult } from '../ports/ledger.js';
import type { GenerationChange, InsertReserve, NewGeneration } from '../ports/store.js';

/**
 * What a memory store needs of a memory ledger to hold and settle its reserves in its own steps, as the Postgres store
 * does with the Postgres ledger (issue 36): a create is then one step (reserve, insert, event) and a finish one (the
 * change, its event, the settle), with no promise of the ledger's in between. `MemoryLedger` is one; the service links
 * a memory store to a memory ledger (`MemoryGenerationStore.settleWith`) when neither's methods were replaced.
 */
export interface InStoreLedger {
  /** `reserve` in one synchronous step; with `inStore`, 'limited' (nothing held) when the owner has more limits than these. */
  reserveNow(userId: string, generationId: string, amount: number, now: number, options: ReserveOptions, inStore?: boolean): ReserveResult | ReserveOutcome | 'limited';
  /** `settle` in one synchronous step. */
  settleNow(generationId: string, amount: number, now: number): number | null;
}

/**
 * The reserve of `insertReserved`: the ledger's, as its `reserve` would hold it (the model the generation's, the key
 * recorded, no key limit), holding the balance and the in-flight cap only. A duplicate of a held reserve holds nothing
 * more ('ok'); another user's throws, as the ledger's own reserve does.
 */
export function reserveInStore(ledger: InStoreLedger | undefined, gen: NewGeneration, reserve: InsertReserve): ReserveResult | 'limited' {
  if (!ledger) throw new Error('insertReserved: no ledger linked (settleWith)');
  const options: ReserveOptions = { modelId: gen.modelId };
  if (reserve.maxInFlight !== undefined) options.maxInFlight = reserve.maxInFlight;
  if (reserve.keyId !== undefined) options.keyId = reserve.keyId;
  // With `inStore`, an owner with an organisation or limits of its own is 'limited' before anything is held, so what
  // comes back is a plain result.
  return ledger.reserveNow(gen.ownerId, gen.id, reserve.amount, reserve.now, options, true) as ReserveResult | 'limited';
}

/**
 * The ledger that settles `change`'s reserve in the change's own step, when it carries one; checked before anything
 * is written, so a settle that cannot be made leaves the change unmade.
 */
export function settleInStore(ledger: InStoreLedger | undefined, change: GenerationChange): InStoreLedger | undefined {
  if (change.settle === undefined) return undefined;
  if (!ledger) throw new Error('a change carries a settle, but this store has no ledger linked (settleWith)');
  if (!Number.isFinite(change.settle)) throw new RangeError(`settle amount must be a finite number, got ${change.settle}`);
  return ledger;
}
