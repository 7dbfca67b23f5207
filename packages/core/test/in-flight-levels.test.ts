import { describe, expect, it } from 'vitest';
import { MemoryLedger } from '@genservice/core';

describe("the memory ledger's in-flight counts beside the other levels", () => {
  it("a reserve refused at the key's or the organisation's cap takes no slot of the user's own cap", async () => {
    const ledger = new MemoryLedger();
    await ledger.credit('u', 100);
    await ledger.createOrganization({ organizationId: 'o', maxInFlight: 1, weight: 1, createdAt: 0 });
    await ledger.addMember('o', { userId: 'u', role: 'member', joinedAt: 0 });
    const windows = { day: 0, month: 0 };
    expect(await ledger.reserve('u', 'g1', 1, 0, { windows, maxInFlight: 2 })).toMatchObject({ result: 'ok' });
    // The organisation is at its cap: refused there, and nothing is held on the user's count.
    for (const id of ['g2', 'g3', 'g4']) expect(await ledger.reserve('u', id, 1, 0, { windows, maxInFlight: 2 })).toMatchObject({ result: 'limit_reached', refusedBy: 'organization' });
    await ledger.settle('g1', 1, 0);
    expect(await ledger.reserve('u', 'g5', 1, 0, { windows, maxInFlight: 2 })).toMatchObject({ result: 'ok' });
    // A key at its cap refuses too, holding nothing on the user.
    expect(await ledger.reserve('u', 'g6', 1, 0, { windows, keyId: 'k', keyMaxInFlight: 0, maxInFlight: 2 })).toMatchObject({ result: 'limit_reached', refusedBy: 'key' });
    await ledger.settle('g5', 1, 0);
    await ledger.removeMember('o', 'u');
    expect(await ledger.reserve('u', 'g7', 1, 0, { windows, maxInFlight: 2 })).toBe('ok');
    expect(await ledger.reserve('u', 'g8', 1, 0, { windows, maxInFlight: 2 })).toBe('ok');
    expect(await ledger.reserve('u', 'g9', 1, 0, { windows, maxInFlight: 2 })).toBe('in_flight_limit');
  });
});
