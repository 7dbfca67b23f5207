/** The lane's turns rule (domain/lane-turns.ts) on its own; the stores are checked by the CapacityStore contract suite. */
import { describe, expect, it } from 'vitest';
import { LANE_TURN_UNITS, LANE_WAITER_TTL_MS, laneTurn, laneTurnCost, waiterUntil } from '../src/domain/lane-turns.js';

describe('laneTurn', () => {
  it('a tenant alone is owed, and the floor follows it', () => {
    expect(laneTurn({ floor: 0, vt: undefined, live: false, lowestOther: undefined })).toEqual({ floor: 0, vt: 0, owed: true });
    expect(laneTurn({ floor: 3, vt: 7, live: false, lowestOther: undefined })).toEqual({ floor: 7, vt: 7, owed: true });
  });

  it('the lowest live virtual time is owed; a tie goes to whoever asks', () => {
    expect(laneTurn({ floor: 0, vt: 5, live: true, lowestOther: 4 })).toEqual({ floor: 4, vt: 5, owed: false });
    expect(laneTurn({ floor: 0, vt: 4, live: true, lowestOther: 4 })).toEqual({ floor: 4, vt: 4, owed: true });
  });

  it('a tenant that was not waiting starts no lower than the floor (no credit banked while idle)', () => {
    expect(laneTurn({ floor: 10, vt: 2, live: false, lowestOther: 12 })).toEqual({ floor: 10, vt: 10, owed: true });
    expect(laneTurn({ floor: 10, vt: undefined, live: false, lowestOther: 10 })).toEqual({ floor: 10, vt: 10, owed: true });
    // A live tenant keeps its time (a refund may have put it below the floor): it is simply owed sooner.
    expect(laneTurn({ floor: 10, vt: 8, live: true, lowestOther: 12 })).toEqual({ floor: 10, vt: 8, owed: true });
  });

  it('a grant costs 1 / weight; a waiter is live until its retry plus the TTL', () => {
    expect(laneTurnCost(1)).toBe(LANE_TURN_UNITS);
    expect(laneTurnCost(5)).toBe(LANE_TURN_UNITS / 5);
    expect(laneTurnCost(undefined)).toBe(LANE_TURN_UNITS);
    expect(laneTurnCost(-3)).toBe(LANE_TURN_UNITS);
    expect(laneTurnCost(1e9)).toBe(LANE_TURN_UNITS / 1000);
    expect(waiterUntil(100, undefined)).toBe(100 + LANE_WAITER_TTL_MS);
    expect(waiterUntil(100, 2000)).toBe(2100 + LANE_WAITER_TTL_MS);
  });
});
