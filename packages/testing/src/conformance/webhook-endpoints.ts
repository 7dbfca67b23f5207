import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../until.js';
import { expectError } from './expect-error.js';
import type { User } from './fixture.js';
import { useFixture, type ModeContext } from './kit.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * Checks a Standard Webhooks signature by the spec itself (HMAC-SHA256 of `id.timestamp.body` with the secret's
 * bytes), not by the library the service signs with: true when one of the header's `v1,` signatures matches.
 */
export function verifiesWith(secret: string, r: Received): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${r.headers['webhook-id']}.${r.headers['webhook-timestamp']}.${r.body}`).digest();
  return String(r.headers['webhook-signature'])
    .split(' ')
    .some((sig) => {
      const got = Buffer.from(sig.replace(/^v1,/, ''), 'base64');
      return got.length === expected.length && timingSafeEqual(got, expected);
    });
}

/**
 * Webhook endpoints as objects (issue 41), on every adapter: created with their secret once, read without it, changed
 * with PATCH (through the host's body parsers too), deleted; scopes; another user's answer as missing ones; deliveries
 * to a receiver on loopback checked against the endpoint's secret, the delivery log, and a replay.
 */
export function defineWebhookEndpointTests(ctx: ModeContext): void {
  describe('webhook endpoints', () => {
    // Deliveries go to a receiver on this machine: its own service allows http and loopback, with a quick retry.
    const fx = useFixture(ctx.mount, ctx.mode, { webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 20, retrySchedule: [3_600_000] } });
    let accept = false;
    const received: Received[] = [];
    let receiverUrl = '';
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
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

    const send = (user: User, method: string, path: string, json?: unknown) =>
      fx.call(path, { method, headers: user.auth, ...(json !== undefined ? { json } : {}) });

    it('creates (201, the secret once), lists and reads without the secret, changes with PATCH, deletes', async () => {
      const user = await fx.user();
      const created = await send(user, 'POST', '/v1/webhook-endpoints', { url: receiverUrl, description: 'prod' });
      expect(created.status, created.text).toBe(201);
      expect(created.body).toMatchObject({ url: receiverUrl, description: 'prod', status: 'enabled', disabledAt: null });
      expect(created.body.secret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
      expect(created.body.events).toContain('generation.completed');
      const id = created.body.id as string;
      const list = await send(user, 'GET', '/v1/webhook-endpoints');
      expect(list.status).toBe(200);
      expect(list.body.data.map((e: { id: string }) => e.id)).toEqual([id]);
      expect(list.text).not.toContain(created.body.secret);
      const one = await send(user, 'GET', `/v1/webhook-endpoints/${id}`);
      expect(one.body).toStrictEqual(list.body.data[0]);
      const patched = await send(user, 'PATCH', `/v1/webhook-endpoints/${id}`, { events: ['generation.failed'], description: null });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body).toMatchObject({ id, events: ['generation.failed'], description: null });
      expectError(await send(user, 'PATCH', `/v1/webhook-endpoints/${id}`, { events: ['generation.nope'] }), 400, 'invalid_request');
      expectError(await fx.call(`/v1/webhook-endpoints/${id}`, { method: 'PATCH', headers: { ...user.auth, 'content-type': 'application/json' }, body: '{"url":' }), 400, 'invalid_json');
      const put = await fx.call(`/v1/webhook-endpoints/${id}`, { method: 'PUT', headers: user.auth, json: {} });
      expectError(put, 405, 'method_not_allowed');
      expect(put.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
      const del = await send(user, 'DELETE', `/v1/webhook-endpoints/${id}`);
      expect(del.status).toBe(204);
      expectError(await send(user, 'GET', `/v1/webhook-endpoints/${id}`), 404, 'not_found');
    });

    it('refuses a URL the outbound guard would refuse, and a body that is not an endpoint, naming the field', async () => {
      const user = await fx.user();
      for (const body of [{ url: 'ftp://example.com/x' }, { url: 'https://' }, { events: ['generation.completed'] }, { url: 'https://example.com', secret: 'whsec_mine' }]) {
        const r = await send(user, 'POST', '/v1/webhook-endpoints', body);
        expectError(r, 400, 'invalid_request');
        expect(r.body.error.details.length, JSON.stringify(body)).toBeGreaterThan(0);
      }
      expect((await send(user, 'GET', '/v1/webhook-endpoints')).body.data).toEqual([]);
    });

    it('needs the generate scope to change, read to read', async () => {
      const user = await fx.user();
      const key = `gs_test_${randomBytes(18).toString('base64url')}`;
      await fx.keys.createKey(key, { keyId: `key_${randomBytes(8).toString('hex')}`, userId: user.userId, name: 'reader', scopes: ['read'], createdAt: Date.now() });
      const reader: User = { ...user, key, auth: { authorization: `Bearer ${key}` } };
      expectError(await send(reader, 'POST', '/v1/webhook-endpoints', { url: receiverUrl }), 403, 'forbidden');
      const made = await send(user, 'POST', '/v1/webhook-endpoints', { url: receiverUrl });
      expect((await send(reader, 'GET', `/v1/webhook-endpoints/${made.body.id}`)).status).toBe(200);
      expectError(await send(reader, 'POST', `/v1/webhook-endpoints/${made.body.id}/rotate-secret`), 403, 'forbidden');
      expectError(await send(reader, 'DELETE', `/v1/webhook-endpoints/${made.body.id}`), 403, 'forbidden');
    });

    it("answers another user's endpoint, its deliveries and a replay exactly as missing ones", async () => {
      const owner = await fx.user();
      const other = await fx.user();
      const made = await send(owner, 'POST', '/v1/webhook-endpoints', { url: receiverUrl });
      const id = made.body.id as string;
      const missing = 'we_AAAAAAAAAAAAAAAAAAAAAA';
      for (const [method, path, json] of [
        ['GET', `/v1/webhook-endpoints/${id}`],
        ['PATCH', `/v1/webhook-endpoints/${id}`, { url: `${receiverUrl}/evil` }],
        ['DELETE', `/v1/webhook-endpoints/${id}`],
        ['POST', `/v1/webhook-endpoints/${id}/rotate-secret`],
        ['GET', `/v1/webhook-endpoints/${id}/deliveries`],
        ['POST', `/v1/webhook-endpoints/${id}/deliveries/msg_x/replay`],
      ] as const) {
        const theirs = await send(other, method, path, json);
        const none = await send(other, method, path.replace(id, missing), json);
        expectError(theirs, 404, 'not_found');
        expect(theirs.text, `${method} ${path}`).toBe(none.text);
      }
      expect((await send(other, 'GET', '/v1/webhook-endpoints')).body.data).toEqual([]);
      expect((await send(owner, 'GET', `/v1/webhook-endpoints/${id}`)).body.url).toBe(receiverUrl);
    });

    it("delivers signed with the endpoint's secret, logs each attempt, and a replay sends the same webhook-id again", async () => {
      const user = await fx.user();
      const made = await send(user, 'POST', '/v1/webhook-endpoints', { url: receiverUrl, events: ['generation.completed'] });
      expect(made.status, made.text).toBe(201);
      accept = false;
      const before = received.length;
      const gen = (await fx.create(user, { modelId: 'noop' })).body.generationId as string;
      await until(() => received.length > before, { what: 'the first attempt', timeoutMs: 10_000 });
      const first = received[before]!;
      expect(verifiesWith(made.body.secret, first)).toBe(true);
      expect(JSON.parse(first.body)).toMatchObject({ type: 'generation.completed', data: { generationId: gen } });
      const log = async () => (await send(user, 'GET', `/v1/webhook-endpoints/${made.body.id}/deliveries`)).body.data;
      await until(async () => (await log())[0]?.attempts.length === 1, { what: 'the attempt logged', timeoutMs: 10_000 });
      const [d] = await log();
      expect(d).toMatchObject({ id: first.headers['webhook-id'], type: 'generation.completed', generationId: gen, state: 'pending' });
      expect(d.attempts[0]).toMatchObject({ status: 500 });
      expect(typeof d.nextAttemptAt).toBe('string');

      accept = true;
      const replay = await send(user, 'POST', `/v1/webhook-endpoints/${made.body.id}/deliveries/${d.id}/replay`);
      expect(replay.status, replay.text).toBe(202);
      await until(async () => (await log())[0]?.state === 'delivered', { what: 'the replay delivered', timeoutMs: 10_000 });
      const again = received.filter((r) => r.headers['webhook-id'] === d.id);
      expect(again).toHaveLength(2);
      expect(again[1]!.body).toBe(first.body);
      expect(verifiesWith(made.body.secret, again[1]!)).toBe(true);
      expect((await log())[0].attempts.map((a: { status: number }) => a.status)).toEqual([500, 204]);
    });
  });
}
