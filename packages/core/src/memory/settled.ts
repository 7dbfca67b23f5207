/**
 * What a settled (or released) reserve leaves in the memory ledger: whose it was, so a second reserve of the id is
 * still refused for another user, and what it charged, which every later settle or release answers unchanged. Every
 * generation leaves one for good, so they are kept apart from the open reserves, frozen, and shared: one object per
 * owner and charge, not one per generation (each object kept is work for every GC: issue 36).
 */
export interface Settled {
  readonly userId: string;
  readonly charged: number;
}

/** Most different (owner, charge) pairs shared; past it, a settled reserve keeps its own object. */
const SHARED_MAX = 4096;

/** The shared `Settled` of one ledger, by owner then charge. */
export class SettledTable {
  private readonly byUser = new Map<string, Map<number, Settled>>();
  private count = 0;

  of(userId: string, charged: number): Settled {
    let byCharge = this.byUser.get(userId);
    const shared = byCharge?.get(charged);
    if (shared !== undefined) return shared;
    const settled: Settled = Object.freeze({ userId, charged });
    if (this.count < SHARED_MAX) {
      if (byCharge === undefined) this.byUser.set(userId, (byCharge = new Map()));
      byCharge.set(charged, settled);
      this.count++;
    }
    return settled;
  }
}
