import express from 'express';
import type { Server } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { HostProcess, createOn, freshStores, seedUsers, type FreshStores, type HostEnv } from './helpers.js';
import { until } from '@genservice/testing';

// Live status and webhooks across host processes on Postgres alone: pg-boss runs the work, Postgres LISTEN/NOTIFY
// (PostgresNotifier) wakes the other instances' streams, long polls and webhook outbox. No host is given Redis.
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function twoHosts(b: Partial<HostEnv> = {}): Promise<{ stores: FreshStores; a: HostProcess; b: HostProcess }> {
  const stores = await freshStores('gs_pgboss_x');
  const start = (id: string, extra: Partial<HostEnv> = {}): HostProcess =>
    new HostProcess({ DATABASE_URL: stores.db.url, INSTANCE_ID: id, LEASE_MS: '1500', RECOVERY_MS: '500', ...extra });
  const first = start('A');
  const second = start('B', b);
  cleanups.push(async () => {
    first.kill('SIGKILL');
    second.kill('SIGKILL');
    await Promise.all([first.exited, second.exited]);
    await stores.drop();
  });
  await Promise.all([first.ready(), second.ready()]);
  return { stores, a: first, b: second };
}

describe('push across host processes (Postgres only: pg-boss + LISTEN/NOTIFY)', () => {
  it('streams and long-polls on an API-only instance a generation another instance runs, woken by the notifier alone', { timeout: 60_000 }, async () => {
    // B runs nothing and polls its log every ten minutes: only a NOTIFY from A can end its stream within the test.
    const { stores, a, b } = await twoHosts({ RUNNER: '0', PUSH_POLL_MS: '600000' });
    await seedUsers(stores, { u: 100 });
    // Accepted by B (enqueued in Postgres), run by A (the only worker).
    const created = await createOn(b.url, 'key-u', 'sleep:800');
    expect(created.status).toBe(201);
    const id = created.generationId!;
    const waiting = fetch(`${b.url}/v1/generations/${id}`, { headers: { authorization: 'Bearer key-u', prefer: 'wait=20' } });
    const res = await fetch(`${b.url}/v1/generations/${id}/events`, { headers: { authorization: 'Bearer key-u' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const text = await res.text(); // the stream ends after the terminal event
    expect(text).toMatch(/event: completed/);
    expect(text).toContain('done by A on attempt 1');
    const polled = await waiting;
    expect(polled.headers.get('preference-applied')).toBe('wait=20');
    const body = (await polled.json()) as { status: string };
    // The long poll answers at the first change it sees: A's claim, or (if it came after) the completion.
    expect(['processing', 'completed']).toContain(body.status);
  });

  it('delivers every webhook event when one of two instances is SIGKILLed mid-delivery', { timeout: 90_000 }, async () => {
    const { stores, a, b } = await twoHosts();
    await seedUsers(stores, { u: 10_000 });
    const secret = ((await (await fetch(`${a.url}/v1/webhooks/secret`, { headers: { authorization: 'Bearer key-u' } })).json()) as { key: string }).key;
    const delivered = new Map<string, number>();
    let slow = true;
    const app = express();
    app.post('/hook', express.raw({ type: 'application/json' }), (req, res) => {
      const body = (req.body as Buffer).toString('utf8');
      const headers = { 'webhook-id': String(req.header('webhook-id')), 'webhook-timestamp': String(req.header('webhook-timestamp')), 'webhook-signature': String(req.header('webhook-signature')) };
      const answer = (): void => {
        try {
          const e = new Webhook(secret).verify(body, headers) as { type: string; data: { generationId: string } };
          if (e.type === 'generation.completed') delivered.set(e.data.generationId, (delivered.get(e.data.generationId) ?? 0) + 1);
          res.sendStatus(204);
        } catch {
          res.sendStatus(400);
        }
      };
      // Slow at first, so deliveries are in flight when an instance dies.
      if (slow) setTimeout(answer, 2000);
      else answer();
    });
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    cleanups.push(() => new Promise((r) => server.close(() => r(undefined))));
    const hook = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const host = i % 2 === 0 ? a : b;
      const r = await fetch(`${host.url}/v1/generations`, {
        method: 'POST',
        headers: { authorization: 'Bearer key-u', 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: 'fake', settings: { prompt: `p${i}` }, webhook: { url: hook, events: ['generation.completed'] } }),
      });
      expect(r.status, await r.clone().text()).toBe(201);
      ids.push(((await r.json()) as { generationId: string }).generationId);
    }
    await until(async () => {
      const { rows } = await stores.pool.query(`SELECT count(*)::int AS n FROM "${stores.schema}".webhook_attempts`);
      return Number(rows[0].n) > 0 || delivered.size > 0;
    }, { what: 'deliveries to begin', timeoutMs: 30_000, intervalMs: 50 });
    a.kill('SIGKILL');
    slow = false;
    await until(() => ids.every((id) => delivered.has(id)), { what: 'every completed event delivered', timeoutMs: 60_000, intervalMs: 100 });
    for (const id of ids) expect(delivered.get(id)).toBeGreaterThanOrEqual(1);
  });
});
