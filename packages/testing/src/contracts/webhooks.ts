import { describe, expect, it } from 'vitest';
import type { NewDelivery, WebhookStore } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';
import { describeWebhookEndpointContract } from './webhook-endpoints.js';

export interface WebhookStoreUnderTest {
  webhooks: WebhookStore;
  close(): Promise<void>;
}

/**
 * Contract every WebhookStore passes. `make()` runs before every test; the suite only relies on the ids it makes, so a
 * backend that keeps data between tests works too.
 */
export function runWebhookStoreContract(name: string, make: () => Promise<WebhookStoreUnderTest>): void {
  describe(`${name}: WebhookStore contract`, () => {
    const subject = useFresh(make);
    const hooks = (): WebhookStore => subject().webhooks;

    function delivery(over: Partial<NewDelivery> = {}): NewDelivery {
      return {
        id: uid('msg'),
        generationId: uid('gen'),
        ownerId: uid('owner'),
        seq: 1,
        type: 'generation.completed',
        url: "https://hooks.example.com/in?x='1'&y=\u00e9",
        payload: '{"type":"generation.completed","data":{"note":"\u2603"}}',
        nextAttemptAt: T0,
        createdAt: T0,
        ...over,
      };
    }

    describe('secrets', () => {
      it('keeps exactly one secret among concurrent ensures, and every call returns it', async () => {
        const user = uid('user');
        expect(await hooks().getSecrets(user, T0)).toBeNull();
        const got = await Promise.all(Array.from({ length: 20 }, (_, i) => hooks().ensureSecret(user, `whsec_candidate${i}`, T0)));
        expect(new Set(got).size).toBe(1);
        expect(await hooks().getSecrets(user, T0)).toEqual({ current: got[0] });
        expect(await hooks().ensureSecret(user, 'whsec_later', T0 + 1)).toBe(got[0]);
        expect(await hooks().getSecrets(uid('other'), T0)).toBeNull();
      });

      it('rotates: the old key stays as previous until the overlap ends', async () => {
        const user = uid('user');
        await hooks().ensureSecret(user, 'whsec_one', T0);
        expect(await hooks().rotateSecret(user, 'whsec_two', T0 + 10, 1000)).toEqual({ current: 'whsec_two', previous: { key: 'whsec_one', expiresAt: T0 + 1010 } });
        expect(await hooks().getSecrets(user, T0 + 1009)).toEqual({ current: 'whsec_two', previous: { key: 'whsec_one', expiresAt: T0 + 1010 } });
        expect(await hooks().getSecrets(user, T0 + 1010)).toEqual({ current: 'whsec_two' });
        // A user who never had one gets it made.
        const fresh = uid('user');
        expect((await hooks().rotateSecret(fresh, 'whsec_first', T0, 1000)).current).toBe('whsec_first');
      });
    });

    /** Leases away, for ever, whatever other tests left due by `at`: a backend that keeps data must not skew claims. */
    async function drain(at: number): Promise<void> {
      while ((await hooks().claimDue(at, 1000, 'drain', 1e12)).length > 0) {
        // again, until nothing is due
      }
    }

    describe('deliveries', () => {
      it('adds idempotently by id: the first write wins', async () => {
        const d = delivery();
        await hooks().addDeliveries([d]);
        await hooks().addDeliveries([{ ...d, payload: '{"changed":true}', url: 'https://elsewhere.example.com' }]);
        const [got] = await hooks().deliveriesOf(d.generationId);
        expect(got).toMatchObject({ id: d.id, payload: d.payload, url: d.url, state: 'pending', attempts: 0, history: [] });
      });

      it("keeps a delivery's traceparent and hands it back with the claim; one enqueued without has none", async () => {
        const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
        await drain(T0 + 50);
        const traced = delivery({ nextAttemptAt: T0 + 50, traceparent });
        const plain = delivery({ nextAttemptAt: T0 + 50 });
        await hooks().addDeliveries([traced, plain]);
        const claimed = await hooks().claimDue(T0 + 50, 10, 'w1', 1000);
        expect(claimed.map((d) => d.id).sort()).toEqual([traced.id, plain.id].sort());
        expect(claimed.find((d) => d.id === traced.id)?.traceparent).toBe(traceparent);
        expect(claimed.find((d) => d.id === plain.id)?.traceparent).toBeUndefined();
        expect((await hooks().deliveriesOf(traced.generationId))[0]?.traceparent).toBe(traceparent);
        expect((await hooks().deliveriesOf(plain.generationId))[0]?.traceparent).toBeUndefined();
      });

      it('hands due pending deliveries out oldest first, up to the limit, each to one claimer under a lease', async () => {
        const owner = uid('owner');
        const gen = uid('gen');
        await drain(T0 + 2000);
        const ds = [3, 1, 2, 9].map((k, i) => delivery({ id: uid(`msg${i}`), ownerId: owner, generationId: gen, seq: i + 1, nextAttemptAt: T0 + k }));
        await hooks().addDeliveries(ds);
        const first = await hooks().claimDue(T0 + 5, 2, 'w1', 1000);
        expect(first.map((d) => d.id)).toEqual([ds[1]!.id, ds[2]!.id]);
        expect(first[0]).toMatchObject({ leaseOwner: 'w1', leaseExpiresAt: T0 + 1005 });
        // Leased ones are not handed out again until the lease ends; the not-yet-due one not before its time.
        const mine = (await hooks().claimDue(T0 + 5, 10, 'w2', 5000)).filter((d) => d.generationId === gen);
        expect(mine.map((d) => d.id)).toEqual([ds[0]!.id]);
        // At T0 + 1005 w1's leases have ended (w2's has not), and the fourth is due.
        const later = (await hooks().claimDue(T0 + 1005, 10, 'w3', 1000)).filter((d) => d.generationId === gen).map((d) => d.id);
        expect(later).toEqual([ds[1]!.id, ds[2]!.id, ds[3]!.id]);
      });

      it('with fairness, caps what is leased per endpoint and per owner, and lets owners take turns (issue 24, item 10)', async () => {
        const at = T0 + 5_000_000;
        await drain(at);
        const slow = uid('owner');
        const other = uid('owner');
        const hanging = 'https://slow.example.com/hook';
        // The slow owner's 10 deliveries to one URL and 6 to three others are all older than the other owner's one.
        const mine = [
          ...Array.from({ length: 10 }, (_, i) => delivery({ id: uid(`slow${i}`), ownerId: slow, url: hanging, nextAttemptAt: at - 1000 + i })),
          ...Array.from({ length: 6 }, (_, i) => delivery({ id: uid(`many${i}`), ownerId: slow, url: `https://u${i % 3}.example.com/`, nextAttemptAt: at - 500 + i })),
          delivery({ id: uid('other'), ownerId: other, url: hanging, nextAttemptAt: at }),
        ];
        await hooks().addDeliveries(mine);
        const fair = { perEndpoint: 2, perOwner: 4 };
        const ours = <T extends { ownerId: string }>(ds: T[]): T[] => ds.filter((d) => d.ownerId === slow || d.ownerId === other);
        // Limit 2: the slow owner's oldest, then the other owner's turn, though nine older ones wait.
        const two = ours(await hooks().claimDue(at, 2, 'w1', 60_000, fair));
        expect(two.map((d) => d.ownerId).sort()).toEqual([slow, other].sort());
        expect(two.find((d) => d.ownerId === slow)!.id).toBe(mine[0]!.id);
        // The rest: the slow owner up to 4 in flight, at most 2 of them to the hanging URL.
        const rest = ours(await hooks().claimDue(at, 100, 'w2', 60_000, fair));
        const slowLeased = [...two, ...rest].filter((d) => d.ownerId === slow);
        expect(slowLeased).toHaveLength(4);
        expect(slowLeased.filter((d) => d.url === hanging)).toHaveLength(2);
        // Nothing more while they are leased; after the leases end, the next ones in the same shape.
        expect(ours(await hooks().claimDue(at + 1, 100, 'w3', 60_000, fair))).toEqual([]);
        const later = ours(await hooks().claimDue(at + 60_000, 100, 'w4', 60_000, fair)).filter((d) => d.ownerId === slow);
        expect(later).toHaveLength(4);
        expect(later.filter((d) => d.url === hanging)).toHaveLength(2);
        // (The same ones: never attempted, they are still the oldest.)
        expect(new Set(later.map((d) => d.id))).toEqual(new Set(slowLeased.map((d) => d.id)));
        // Without fairness, the old order: oldest first, no caps.
        const all = ours(await hooks().claimDue(at + 120_000, 100, 'w5', 60_000));
        expect(all.map((d) => d.id)).toEqual(mine.map((d) => d.id));
      });

      it('with fairness, still gives each due delivery to exactly one of ten racing claimers', async () => {
        const at = T0 + 9_000_000;
        await drain(at);
        const owners = [uid('owner'), uid('owner'), uid('owner')];
        const ds = Array.from({ length: 12 }, (_, i) => delivery({ id: uid(`frace${i}`), ownerId: owners[i % 3]!, nextAttemptAt: at }));
        await hooks().addDeliveries(ds);
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) => hooks().claimDue(at, 5, `w${i}`, 60_000, { perEndpoint: 100, perOwner: 100 })),
        );
        const ids = results.flat().filter((d) => owners.includes(d.ownerId)).map((d) => d.id);
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids.length).toBe(12);
      });

      it('gives each due delivery to exactly one of ten racing claimers', async () => {
        const gen = uid('gen');
        await drain(T0 + 1);
        const ds = Array.from({ length: 12 }, (_, i) => delivery({ id: uid(`race${i}`), generationId: gen }));
        await hooks().addDeliveries(ds);
        const results = await Promise.all(Array.from({ length: 10 }, (_, i) => hooks().claimDue(T0 + 1, 5, `w${i}`, 60_000)));
        const ids = results.flat().filter((d) => d.generationId === gen).map((d) => d.id);
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids.length).toBe(12);
      });

      it('records an attempt only for the lease holder, then applies its outcome', async () => {
        const d = delivery();
        await drain(T0 + 1_000_000);
        await hooks().addDeliveries([d]);
        const [claimed] = (await hooks().claimDue(T0, 10, 'w1', 1000)).filter((x) => x.id === d.id);
        expect(claimed).toBeDefined();
        expect(await hooks().recordAttempt(d.id, 'w2', { at: T0 + 1, status: 500, durationMs: 5 }, { state: 'pending', nextAttemptAt: T0 + 100 })).toBe(false);
        expect(await hooks().recordAttempt(d.id, 'w1', { at: T0 + 1, status: 500, durationMs: 5 }, { state: 'pending', nextAttemptAt: T0 + 100 })).toBe(true);
        // Not due again before its time; then due, and a stale holder's late record is refused.
        expect((await hooks().claimDue(T0 + 99, 10, 'w1', 1000)).some((x) => x.id === d.id)).toBe(false);
        expect((await hooks().claimDue(T0 + 100, 10, 'w1', 10)).some((x) => x.id === d.id)).toBe(true);
        expect((await hooks().claimDue(T0 + 200, 10, 'w2', 1000)).some((x) => x.id === d.id)).toBe(true);
        expect(await hooks().recordAttempt(d.id, 'w1', { at: T0 + 201, status: 200, durationMs: 5 }, { state: 'delivered' })).toBe(false);
        expect(await hooks().recordAttempt(d.id, 'w2', { at: T0 + 201, error: 'timed out after 15 s', durationMs: 15000 }, { state: 'failed' })).toBe(true);
        const [after] = await hooks().deliveriesOf(d.generationId);
        expect(after).toMatchObject({ state: 'failed', attempts: 2 });
        expect(after!.leaseOwner).toBeUndefined();
        expect(after!.history).toEqual([
          { at: T0 + 1, status: 500, durationMs: 5 },
          { at: T0 + 201, error: 'timed out after 15 s', durationMs: 15000 },
        ]);
        // Finished deliveries are never handed out again.
        expect((await hooks().claimDue(T0 + 1_000_000, 100, 'w3', 1000)).some((x) => x.id === d.id)).toBe(false);
      });

      it('stops every pending delivery of one owner to one URL, and nothing else', async () => {
        const owner = uid('owner');
        const url = 'https://gone.example.com/hook';
        const a = delivery({ ownerId: owner, url });
        const b = delivery({ ownerId: owner, url });
        const otherUrl = delivery({ ownerId: owner, url: `${url}/2` });
        const otherOwner = delivery({ url });
        await hooks().addDeliveries([a, b, otherUrl, otherOwner]);
        expect(await hooks().stopEndpoint(owner, url)).toBe(2);
        for (const [d, state] of [[a, 'gone'], [b, 'gone'], [otherUrl, 'pending'], [otherOwner, 'pending']] as const) {
          expect((await hooks().deliveriesOf(d.generationId))[0]!.state).toBe(state);
        }
      });

      it('lists one generation\u2019s deliveries in seq order and deletes them with their attempts', async () => {
        const gen = uid('gen');
        const later = delivery({ generationId: gen, seq: 7 });
        const earlier = delivery({ generationId: gen, seq: 3 });
        const other = delivery();
        await hooks().addDeliveries([later, earlier, other]);
        await hooks().claimDue(T0, 1000, 'w', 1000);
        await hooks().recordAttempt(earlier.id, 'w', { at: T0 + 1, status: 204, durationMs: 1 }, { state: 'delivered' });
        expect((await hooks().deliveriesOf(gen)).map((d) => d.id)).toEqual([earlier.id, later.id]);
        expect(await hooks().deleteForGenerations([gen])).toBe(2);
        expect(await hooks().deliveriesOf(gen)).toEqual([]);
        expect(await hooks().deliveriesOf(other.generationId)).toHaveLength(1);
        expect(await hooks().deleteForGenerations([])).toBe(0);
      });
    });

    describeWebhookEndpointContract(hooks);

    describe('cursors', () => {
      it("reads '' when unset and moves only from where it is; one of racing advances wins", async () => {
        const name = uid('cursor');
        expect(await hooks().getCursor(name)).toBe('');
        expect(await hooks().advanceCursor(name, '5', '10')).toBe(false);
        expect(await hooks().advanceCursor(name, '', '10')).toBe(true);
        expect(await hooks().getCursor(name)).toBe('10');
        // Opaque strings, compared exactly: a store must not read '010' or '10.0' as the same cursor.
        expect(await hooks().advanceCursor(name, '010', '11')).toBe(false);
        expect(await hooks().advanceCursor(name, '10', '123:45')).toBe(true);
        expect(await hooks().getCursor(name)).toBe('123:45');
        const wins = await Promise.all(Array.from({ length: 10 }, (_, i) => hooks().advanceCursor(name, '123:45', `200:${i}`)));
        expect(wins.filter(Boolean)).toHaveLength(1);
        const racers = uid('cursor');
        const fromZero = await Promise.all(Array.from({ length: 10 }, (_, i) => hooks().advanceCursor(racers, '', String(1 + i))));
        expect(fromZero.filter(Boolean)).toHaveLength(1);
      });
    });
  });
}
