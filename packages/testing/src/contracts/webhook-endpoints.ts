import { describe, expect, it } from 'vitest';
import type { NewDelivery, WebhookEndpointRecord, WebhookStore } from '@genservice/core/ports';
import { T0, uid } from './harness.js';

/**
 * The registered-endpoint half of the WebhookStore contract (issue 41): endpoints owner-scoped, their secrets and
 * rotation, failure streaks and the one disable of racing callers, their delivery log and replay. Run inside
 * `runWebhookStoreContract`; relies only on the ids it makes.
 */
export function describeWebhookEndpointContract(hooks: () => WebhookStore): void {
  function endpoint(over: Partial<WebhookEndpointRecord> = {}): WebhookEndpointRecord {
    return {
      id: uid('we'),
      ownerId: uid('owner'),
      url: "https://hooks.example.com/in?x='1'&y=\u00e9",
      events: ['generation.completed', 'webhook_endpoint.disabled'],
      description: 'prod \u2603',
      secret: 'whsec_one',
      createdAt: T0,
      updatedAt: T0,
      ...over,
    };
  }

  function delivery(e: WebhookEndpointRecord, over: Partial<NewDelivery> = {}): NewDelivery {
    return {
      id: uid('msg'),
      generationId: uid('gen'),
      ownerId: e.ownerId,
      seq: 1,
      type: 'generation.completed',
      url: e.url,
      endpointId: e.id,
      payload: '{"type":"generation.completed"}',
      nextAttemptAt: T0,
      createdAt: T0,
      ...over,
    };
  }

  describe('registered endpoints', () => {
    it('stores an endpoint whole and answers it to its owner only; lists an owner\u2019s oldest first', async () => {
      const a = endpoint();
      const b = endpoint({ ownerId: a.ownerId, createdAt: T0 + 1, updatedAt: T0 + 1, description: undefined, previousSecret: { key: 'whsec_zero', expiresAt: T0 + 5 } });
      delete b.description;
      await hooks().createEndpoint(b);
      await hooks().createEndpoint(a);
      expect(await hooks().getEndpoint(a.id, a.ownerId)).toEqual(a);
      expect(await hooks().getEndpoint(b.id, a.ownerId)).toEqual(b);
      expect(await hooks().getEndpoint(a.id, uid('owner'))).toBeNull();
      expect(await hooks().getEndpoint(uid('we'), a.ownerId)).toBeNull();
      expect((await hooks().listEndpoints(a.ownerId)).map((e) => e.id)).toEqual([a.id, b.id]);
      expect(await hooks().listEndpoints(uid('owner'))).toEqual([]);
    });

    it('changes only the fields given, owner-scoped; a null description is removed', async () => {
      const e = endpoint();
      await hooks().createEndpoint(e);
      expect(await hooks().updateEndpoint(e.id, uid('owner'), { url: 'https://evil.example.com', updatedAt: T0 + 1 })).toBeNull();
      const changed = await hooks().updateEndpoint(e.id, e.ownerId, { events: ['generation.failed'], updatedAt: T0 + 2 });
      expect(changed).toEqual({ ...e, events: ['generation.failed'], updatedAt: T0 + 2 });
      const cleared = await hooks().updateEndpoint(e.id, e.ownerId, { url: 'https://other.example.com/x', description: null, updatedAt: T0 + 3 });
      const { description: _d, ...rest } = e;
      expect(cleared).toEqual({ ...rest, url: 'https://other.example.com/x', events: ['generation.failed'], updatedAt: T0 + 3 });
      expect(await hooks().getEndpoint(e.id, e.ownerId)).toEqual(cleared);
    });

    it('rotates its secret, keeping the old one as previous until the overlap ends', async () => {
      const e = endpoint();
      await hooks().createEndpoint(e);
      expect(await hooks().rotateEndpointSecret(e.id, uid('owner'), 'whsec_evil', T0, 1000)).toBeNull();
      const r = await hooks().rotateEndpointSecret(e.id, e.ownerId, 'whsec_two', T0 + 10, 1000);
      expect(r).toMatchObject({ secret: 'whsec_two', previousSecret: { key: 'whsec_one', expiresAt: T0 + 1010 }, updatedAt: T0 + 10 });
      expect(await hooks().getEndpoint(e.id, e.ownerId)).toEqual(r);
    });

    it('keeps a failure streak from its first failure; a success ends it', async () => {
      const e = endpoint();
      await hooks().createEndpoint(e);
      expect(await hooks().noteEndpointAttempt(e.id, true, T0)).toBeNull();
      expect(await hooks().noteEndpointAttempt(e.id, false, T0 + 10)).toBe(T0 + 10);
      expect(await hooks().noteEndpointAttempt(e.id, false, T0 + 20)).toBe(T0 + 10);
      expect((await hooks().getEndpoint(e.id, e.ownerId))!.failingSince).toBe(T0 + 10);
      expect(await hooks().noteEndpointAttempt(e.id, true, T0 + 30)).toBeNull();
      expect(await hooks().noteEndpointAttempt(e.id, false, T0 + 40)).toBe(T0 + 40);
      expect(await hooks().noteEndpointAttempt(uid('we'), false, T0)).toBeNull();
    });

    it('disables once among racing callers, giving up its pending deliveries only; enabling clears the streak', async () => {
      const e = endpoint();
      await hooks().createEndpoint(e);
      const pending = delivery(e);
      const done = delivery(e);
      const elsewhere = delivery(endpoint({ ownerId: e.ownerId }));
      await hooks().addDeliveries([pending, done, elsewhere]);
      const [claimedDone] = (await hooks().claimDue(T0, 1000, 'w', 1000)).filter((d) => d.id === done.id);
      expect(claimedDone).toBeDefined();
      await hooks().recordAttempt(done.id, 'w', { at: T0 + 1, status: 204, durationMs: 1 }, { state: 'delivered' });
      await hooks().noteEndpointAttempt(e.id, false, T0 + 2);
      const wins = await Promise.all(Array.from({ length: 8 }, () => hooks().disableEndpoint(e.id, T0 + 5)));
      expect(wins.filter(Boolean)).toHaveLength(1);
      const disabled = (await hooks().getEndpoint(e.id, e.ownerId))!;
      expect(disabled.disabledAt).toBe(T0 + 5);
      // A disabled endpoint's streak is no longer kept.
      expect(await hooks().noteEndpointAttempt(e.id, false, T0 + 6)).toBeNull();
      const states = Object.fromEntries((await hooks().endpointDeliveries(e.id, e.ownerId, 10)).map((d) => [d.id, d.state]));
      expect(states).toEqual({ [pending.id]: 'failed', [done.id]: 'delivered' });
      expect((await hooks().deliveriesOf(elsewhere.generationId))[0]!.state).toBe('pending');
      const enabled = await hooks().updateEndpoint(e.id, e.ownerId, { disabledAt: null, updatedAt: T0 + 7 });
      expect(enabled!.disabledAt).toBeUndefined();
      expect(enabled!.failingSince).toBeUndefined();
      // An owner's disable through update gives up the pending deliveries too.
      const again = delivery(e);
      await hooks().addDeliveries([again]);
      expect((await hooks().updateEndpoint(e.id, e.ownerId, { disabledAt: T0 + 8, updatedAt: T0 + 8 }))!.disabledAt).toBe(T0 + 8);
      expect((await hooks().deliveriesOf(again.generationId))[0]!.state).toBe('failed');
    });

    it('deletes owner-scoped, its pending deliveries gone, their history still readable', async () => {
      const e = endpoint();
      await hooks().createEndpoint(e);
      const d = delivery(e);
      await hooks().addDeliveries([d]);
      expect(await hooks().deleteEndpoint(e.id, uid('owner'))).toBe(false);
      expect(await hooks().deleteEndpoint(e.id, e.ownerId)).toBe(true);
      expect(await hooks().deleteEndpoint(e.id, e.ownerId)).toBe(false);
      expect(await hooks().getEndpoint(e.id, e.ownerId)).toBeNull();
      expect(await hooks().deliveriesOf(d.generationId)).toMatchObject([{ id: d.id, state: 'gone', endpointId: e.id }]);
    });

    it('lists an endpoint\u2019s deliveries newest first with their attempts, up to the limit, for its owner only', async () => {
      const e = endpoint();
      await hooks().createEndpoint(e);
      const ds = [0, 1, 2].map((i) => delivery(e, { createdAt: T0 + i, nextAttemptAt: T0 + 100_000 }));
      await hooks().addDeliveries([...ds, delivery(endpoint({ ownerId: e.ownerId }))]);
      const got = await hooks().endpointDeliveries(e.id, e.ownerId, 2);
      expect(got.map((d) => d.id)).toEqual([ds[2]!.id, ds[1]!.id]);
      expect(got[0]).toMatchObject({ endpointId: e.id, url: e.url, history: [], state: 'pending' });
      expect(await hooks().endpointDeliveries(e.id, uid('owner'), 10)).toEqual([]);
    });

    it('replays a delivery of that endpoint: pending and due now, same id and payload; busy while leased', async () => {
      const e = endpoint();
      await hooks().createEndpoint(e);
      const d = delivery(e, { nextAttemptAt: T0 + 50 });
      await hooks().addDeliveries([d]);
      const claimed = (await hooks().claimDue(T0 + 50, 1000, 'w', 1000)).find((x) => x.id === d.id);
      expect(claimed).toBeDefined();
      expect(await hooks().replayDelivery(d.id, e.id, T0 + 60)).toBe('busy');
      await hooks().recordAttempt(d.id, 'w', { at: T0 + 60, status: 500, durationMs: 3 }, { state: 'failed' });
      expect(await hooks().replayDelivery(d.id, uid('we'), T0 + 70)).toBeNull();
      expect(await hooks().replayDelivery(uid('msg'), e.id, T0 + 70)).toBeNull();
      const replayed = await hooks().replayDelivery(d.id, e.id, T0 + 70);
      expect(replayed).toMatchObject({ id: d.id, payload: d.payload, state: 'pending', nextAttemptAt: T0 + 70, attempts: 1, endpointId: e.id });
      const again = (await hooks().claimDue(T0 + 70, 1000, 'w2', 1000)).find((x) => x.id === d.id);
      // The claim hands the endpoint back: the sender signs with that endpoint's secret.
      expect(again).toMatchObject({ endpointId: e.id, url: e.url });
      expect(await hooks().recordAttempt(d.id, 'w2', { at: T0 + 71, status: 200, durationMs: 2 }, { state: 'delivered' })).toBe(true);
      const [after] = await hooks().deliveriesOf(d.generationId);
      expect(after!.history.map((a) => a.status)).toEqual([500, 200]);
      expect(after!.state).toBe('delivered');
    });
  });
}
