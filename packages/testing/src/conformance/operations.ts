/**
 * The operator console (issue 41, items 2 to 4): its pages served with a CSP that names no other origin, and the
 * documented admin reads it is built on (a user with keys and balances, their usage and generations, one generation
 * with its event log, the queue's health) and the user's own key list.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../until.js';
import { ADMIN_KEY } from './fixture.js';
import { JSON_TYPE, useFixture, type ModeContext } from './kit.js';

const ADMIN = { authorization: `Bearer ${ADMIN_KEY}` };

export function defineConsoleTests({ mount, mode }: ModeContext): void {
  describe('the operator console and its admin reads (issue 41)', () => {
    const fx = useFixture(mount, mode, { console: true });

    it('serves the console at console/ and the user page at console/me, with a CSP that allows no other origin', async () => {
      const redirect = await fx.call('/console');
      expect(redirect.status).toBe(308);
      expect(redirect.headers.get('location')).toBe('console/');
      for (const path of ['/console/', '/console/me', '/console/console.js', '/console/chart.js']) {
        const r = await fx.call(path);
        expect(r.status, path).toBe(200);
        const csp = r.headers.get('content-security-policy') ?? '';
        const sources = csp.split(';').flatMap((d) => d.trim().split(/\s+/).slice(1));
        // Only 'self', 'none', data: and blob: (no publicUrl here): no host, no http: or https: wildcard.
        expect(sources.filter((s) => !["'self'", "'none'", 'data:', 'blob:'].includes(s)), path).toEqual([]);
      }
      expect((await fx.call('/console/')).text).toMatch(/<label for="admin-key">Admin key<\/label>/);
      expect((await fx.call('/console/me')).text).toMatch(/<label for="api-key">API key<\/label>/);
      expect((await fx.call('/console/chart.js')).text).toMatch(/Chart\.js v4/);
      expect((await fx.call('/console/nope.js')).status).toBe(404);
    });

    it('reads a user (balance, keys with budget spend), their generations with events, usage and the queue', async () => {
      const userId = `console-${Math.random().toString(36).slice(2, 10)}`;
      expect((await fx.call('/v1/admin/users', { method: 'POST', headers: ADMIN, json: { userId, balance: 500 } })).status).toBe(201);
      const key = await fx.call(`/v1/admin/users/${userId}/keys`, { method: 'POST', headers: ADMIN, json: { name: 'ci', budget: { amount: 100, period: 'day' } } });
      expect(key.status).toBe(201);
      const auth = { authorization: `Bearer ${key.body.apiKey as string}` };
      const created = await fx.call('/v1/generations', { method: 'POST', headers: auth, json: { modelId: 'echo', settings: { prompt: 'hi' } } });
      expect(created.status).toBe(201);
      const id = created.body.generationId as string;
      await fx.terminal({ userId, key: key.body.apiKey, auth }, id);

      // The user list, walked page by page, has the new user with its balance.
      const listed: Array<{ userId: string; balance: number }> = [];
      let cursor: string | null = null;
      do {
        const page = await fx.call(`/v1/admin/users?limit=200${cursor ? `&cursor=${cursor}` : ''}`, { headers: ADMIN });
        expect(page.status, page.text).toBe(200);
        listed.push(...page.body.data);
        cursor = page.body.nextCursor;
      } while (cursor);
      expect(listed.find((u) => u.userId === userId)).toEqual({ userId, balance: 490, reserved: 0, settled: 10 });
      expect((await fx.call('/v1/admin/users?limit=0', { headers: ADMIN })).status).toBe(400);
      expect((await fx.call('/v1/admin/users?cursor=%21', { headers: ADMIN })).status).toBe(400);

      const user = await fx.call(`/v1/admin/users/${userId}`, { headers: ADMIN });
      expect(user.status).toBe(200);
      expect(user.contentType).toMatch(JSON_TYPE);
      expect(user.headers.get('cache-control')).toBe('no-store');
      expect(user.body).toMatchObject({ userId, balance: 490, reserved: 0, settled: 10 });
      expect(user.body.keys).toEqual([expect.objectContaining({ keyId: key.body.keyId, name: 'ci', budget: { amount: 100, period: 'day' }, budgetSpent: 10 })]);

      const list = await fx.call(`/v1/admin/users/${userId}/generations?modelId=echo&status=completed`, { headers: ADMIN });
      expect(list.status).toBe(200);
      expect(list.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([id]);
      expect(list.body.data[0]).toMatchObject({ status: 'completed', result: 'echo: hi', price: 10 });

      const one = await fx.call(`/v1/admin/users/${userId}/generations/${id}`, { headers: ADMIN });
      expect(one.status).toBe(200);
      expect(one.body.generation).toMatchObject({ generationId: id, status: 'completed' });
      expect(one.body.events.map((e: { type: string }) => e.type)).toEqual(expect.arrayContaining(['created', 'processing', 'completed']));
      expect(one.body.events.map((e: { seq: number }) => e.seq)).toEqual(one.body.events.map((_: unknown, i: number) => i + 1));
      // Another user's id with this generation reads as absent, as on the user's own routes.
      expect((await fx.call(`/v1/admin/users/someone-else/generations/${id}`, { headers: ADMIN })).status).toBe(404);

      const usage = await fx.call(`/v1/admin/users/${userId}/usage?groupBy=model`, { headers: ADMIN });
      expect(usage.status).toBe(200);
      expect(usage.body).toEqual({ data: [{ modelId: 'echo', count: 1, tokens: 10 }], total: { count: 1, tokens: 10 } });
      expect((await fx.call(`/v1/admin/users/${userId}/usage?groupBy=nope`, { headers: ADMIN })).status).toBe(400);

      const queue = await fx.call('/v1/admin/queue', { headers: ADMIN });
      expect(queue.status).toBe(200);
      expect(queue.body.models).toEqual(expect.arrayContaining([expect.objectContaining({ modelId: 'echo', provider: 'provider 1', resultType: 'text' })]));
      expect(queue.body).toMatchObject({ truncated: false });
      expect(typeof queue.body.failuresLastHour).toBe('number');

      // The user's own keys, with the same budget spend.
      const own = await fx.call('/v1/keys', { headers: auth });
      expect(own.status).toBe(200);
      expect(own.body.data).toEqual([expect.objectContaining({ keyId: key.body.keyId, budgetSpent: 10 })]);
    });

    it('answers the admin reads to admin keys only (a user key is 401), and refuses bad input with a 400 or 404', async () => {
      const u = await fx.user();
      for (const path of ['/v1/admin/queue', `/v1/admin/users/${u.userId}`, `/v1/admin/users/${u.userId}/generations`, `/v1/admin/users/${u.userId}/usage`]) {
        const r = await fx.call(path, { headers: u.auth });
        expect(r.status, path).toBe(401);
      }
      expect((await fx.call('/v1/keys', { headers: ADMIN })).status).toBe(401);
      expect((await fx.call(`/v1/admin/users/${u.userId}/generations?limit=0`, { headers: ADMIN })).status).toBe(400);
      expect((await fx.call(`/v1/admin/users/${u.userId}/generations/not-an-id`, { headers: ADMIN })).status).toBe(404);
    });
  });

  describe("the console's view of a user's webhook endpoints: deliveries and a replay, with the admin key (issue 41)", () => {
    const fx = useFixture(mount, mode, { console: true, webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 20, retrySchedule: [3_600_000] } });
    let accept = false;
    const statuses: number[] = [];
    let receiverUrl = '';
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        statuses.push(accept ? 204 : 500);
        res.writeHead(accept ? 204 : 500).end();
      });
    });
    beforeAll(async () => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });

    it('lists the endpoints (no secret) and deliveries of a user, and replays a failed one to a receiver that then accepts it', async () => {
      const user = await fx.user();
      const made = await fx.call('/v1/webhook-endpoints', { method: 'POST', headers: user.auth, json: { url: receiverUrl, events: ['generation.completed'] } });
      expect(made.status, made.text).toBe(201);
      const created = await fx.create(user, { modelId: 'noop' });
      await fx.terminal(user, created.body.generationId);
      const base = `/v1/admin/users/${user.userId}/webhook-endpoints`;
      const endpoints = await fx.call(base, { headers: ADMIN });
      expect(endpoints.status).toBe(200);
      expect(endpoints.body.data).toEqual([expect.objectContaining({ id: made.body.id, url: receiverUrl, status: 'enabled' })]);
      expect(endpoints.text).not.toContain(made.body.secret);
      const log = async () => (await fx.call(`${base}/${made.body.id}/deliveries`, { headers: ADMIN })).body.data;
      const [failed] = await until(log, { accept: (d) => d[0]?.attempts.length === 1, what: 'the first (failed) attempt', timeoutMs: 10_000 });
      expect(failed).toMatchObject({ type: 'generation.completed', generationId: created.body.generationId, attempts: [{ status: 500 }] });

      accept = true;
      const replay = await fx.call(`${base}/${made.body.id}/deliveries/${failed.id}/replay`, { method: 'POST', headers: ADMIN });
      expect(replay.status, replay.text).toBe(202);
      const [delivered] = await until(log, { accept: (d) => d[0]?.state === 'delivered', what: 'the replay delivered', timeoutMs: 10_000 });
      expect(delivered.attempts.map((a: { status: number }) => a.status)).toEqual([500, 204]);
      expect(statuses).toEqual([500, 204]);

      // A user key there is 401; another user's endpoint reads as missing.
      expect((await fx.call(base, { headers: user.auth })).status).toBe(401);
      const other = await fx.user();
      expect((await fx.call(`/v1/admin/users/${other.userId}/webhook-endpoints/${made.body.id}/deliveries`, { headers: ADMIN })).status).toBe(404);
    });
  });
}
