// Webhook endpoints as objects (issue 41, item 1), through the service against real receivers on loopback: each
// delivery verified with the endpoint's own secret (standardwebhooks), rotation signing with both secrets, the delivery
// log and replay (same webhook-id), owner scoping, and disabling after a failure period on a fake clock.
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryAuditLog,
  MemoryLedger,
  MemoryWebhookStore,
  type GenerationService,
  type GenerationServiceOptions,
} from '@genservice/core';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver on loopback: `status()` decides each answer; every request is kept. */
async function receiver(status: (r: Received) => number = () => 204) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      received.push(r);
      res.writeHead(status(r)).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return { base, received };
}

function make(extra: Partial<GenerationServiceOptions> = {}, webhooks: Record<string, unknown> = {}) {
  const webhookStore = new MemoryWebhookStore();
  const auditLog = new MemoryAuditLog();
  const service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
        generate: async () => ({ text: 'hello' }),
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 10_000, bob: 10_000 } }),
    recovery: { intervalMs: 0 },
    webhookStore,
    auditLog,
    webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10, ...webhooks },
    ...extra,
  });
  if (!(extra.clock instanceof FakeClock)) cleanups.push(() => service.stop({ timeoutMs: 500 }));
  return { service, webhookStore, auditLog };
}

async function call(service: GenerationService, key: string, method: string, path: string, body?: unknown) {
  const r = await service.handle({
    method,
    path,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = String(r.body ?? '');
  return { status: r.status, body: text === '' ? undefined : JSON.parse(text) };
}

async function generate(service: GenerationService, key: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await call(service, key, 'POST', '/v1/generations', { modelId: 'ok', ...extra });
  expect(r.status).toBe(201);
  return r.body.generationId as string;
}

function webhookHeaders(r: Received): Record<string, string> {
  return { 'webhook-id': String(r.headers['webhook-id']), 'webhook-timestamp': String(r.headers['webhook-timestamp']), 'webhook-signature': String(r.headers['webhook-signature']) };
}

describe('webhook endpoints as objects', () => {
  it('registers an endpoint (secret shown once), delivers signed with its own secret, and lists, changes and deletes it', async () => {
    const { service } = make();
    await service.start();
    const hook = await receiver();
    const created = await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${hook.base}/a`, events: ['generation.completed'], description: 'prod' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ url: `${hook.base}/a`, events: ['generation.completed'], description: 'prod', status: 'enabled', disabledAt: null });
    expect(created.body.id).toMatch(/^we_[A-Za-z0-9_-]{22}$/);
    expect(created.body.secret).toMatch(/^whsec_/);
    const { id, secret } = created.body as { id: string; secret: string };

    const list = await call(service, 'ka', 'GET', '/v1/webhook-endpoints');
    expect(list.body.data).toHaveLength(1);
    expect(JSON.stringify(list.body)).not.toContain(secret.slice(6));
    const one = await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${id}`);
    expect(one.body).not.toHaveProperty('secret');
    expect(one.body.createdAt).toBe(created.body.createdAt);

    // A generation's own webhook keeps working beside it; each receiver is signed with its own secret.
    const own = await receiver();
    const gen = await generate(service, 'ka', { webhook: { url: `${own.base}/own`, events: ['generation.completed'] } });
    await until(() => hook.received.length === 1 && own.received.length === 1, 'both deliveries');
    const got = hook.received[0]!;
    const verified = new Webhook(secret).verify(got.body, webhookHeaders(got)) as { type: string; data: { generationId: string } };
    expect(verified).toMatchObject({ type: 'generation.completed', data: { generationId: gen } });
    const accountSecret = (await call(service, 'ka', 'GET', '/v1/webhooks/secret')).body.key as string;
    expect(() => new Webhook(accountSecret).verify(got.body, webhookHeaders(got))).toThrow();
    expect(() => new Webhook(accountSecret).verify(own.received[0]!.body, webhookHeaders(own.received[0]!))).not.toThrow();

    const patched = await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${id}`, { description: null, events: ['generation.completed', 'generation.failed'] });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ description: null, events: ['generation.completed', 'generation.failed'] });
    expect((await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${id}`, { colour: 'red' })).status).toBe(400);
    expect((await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${id}`, { events: [] })).status).toBe(400);

    expect((await call(service, 'ka', 'DELETE', `/v1/webhook-endpoints/${id}`)).status).toBe(204);
    expect((await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${id}`)).status).toBe(404);
    expect((await call(service, 'ka', 'GET', '/v1/webhook-endpoints')).body.data).toEqual([]);
  });

  it("sends generation.deleted to an endpoint that lists it, and leaves out a disabled endpoint", async () => {
    const { service } = make();
    await service.start();
    const hook = await receiver();
    const off = await receiver();
    const { body } = await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${hook.base}/d`, events: ['generation.deleted'] });
    const disabled = (await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${off.base}/off`, events: ['generation.completed', 'generation.deleted'] })).body;
    expect((await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${disabled.id}`, { disabled: true })).body).toMatchObject({ status: 'disabled' });
    const gen = await generate(service, 'ka');
    await until(async () => (await call(service, 'ka', 'GET', `/v1/generations/${gen}`)).body.status === 'completed', 'completed');
    expect((await call(service, 'ka', 'DELETE', `/v1/generations/${gen}`)).status).toBe(204);
    await until(() => hook.received.length === 1, 'generation.deleted');
    const r = hook.received[0]!;
    expect(new Webhook(body.secret).verify(r.body, webhookHeaders(r))).toMatchObject({ type: 'generation.deleted', data: { generationId: gen, status: 'deleted' } });
    expect(off.received).toHaveLength(0);
  });

  it("is the same use case from the host's code as over HTTP", async () => {
    const { service } = make();
    const hook = await receiver();
    const made = await service.webhookEndpoints.create('alice', { url: `${hook.base}/code`, events: ['generation.failed'] });
    expect(made.secret).toMatch(/^whsec_/);
    expect((await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${made.id}`)).body).toEqual(await service.webhookEndpoints.get('alice', made.id));
    await expect(service.webhookEndpoints.get('bob', made.id)).rejects.toMatchObject({ code: 'not_found' });
    await expect(service.webhookEndpoints.create('alice', { url: `${hook.base}/x`, events: ['generation.completed', 'generation.completed'] })).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it('refuses what is not a usable endpoint with a 400 naming the field, and storing nothing', async () => {
    const { service } = make({}, { allowPrivateUrls: false, allowHttp: false });
    for (const body of [{}, { url: 'http://example.com/x' }, { url: 'https://127.0.0.1/x' }, { url: 'not a url' }, { url: 'https://example.com', events: ['generation.created'] }, { url: 'https://example.com', extra: 1 }, { url: 'https://example.com', description: 'a\ud800b' }, { url: 'https://example.com', description: 'tab\there' }]) {
      const r = await call(service, 'ka', 'POST', '/v1/webhook-endpoints', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      const fields = r.body.error.details.map((d: { field: string }) => d.field);
      expect(fields.length).toBeGreaterThan(0);
      if ('description' in body) expect(fields).toEqual(['description']);
      else if ('events' in body) expect(fields).toEqual(['events.0']);
      else if ('url' in body && !('extra' in body)) expect(fields).toEqual(['url']);
    }
    expect((await call(service, 'ka', 'GET', '/v1/webhook-endpoints')).body.data).toEqual([]);
  });

  it('keeps the cap on endpoints per user when creates race: the ones past it are refused and not kept', async () => {
    const { service } = make({}, { maxEndpointsPerUser: 3 });
    const create = (i: number) => call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `http://127.0.0.1:9/${i}` });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => create(i)));
    const created = answers.filter((a) => a.status === 201).map((a) => a.body.id as string);
    expect(created.length).toBeLessThanOrEqual(3);
    expect(answers.filter((a) => a.status === 400).map((a) => a.body.error.details[0].field)).toEqual(Array(12 - created.length).fill('url'));
    const kept = async () => (await call(service, 'ka', 'GET', '/v1/webhook-endpoints')).body.data.map((e: { id: string }) => e.id);
    expect((await kept()).sort()).toEqual(created.sort());
    // One at a time, the cap fills up to exactly 3.
    for (let i = created.length; i < 3; i++) expect((await create(100 + i)).status).toBe(201);
    expect((await create(200)).status).toBe(400);
    expect(await kept()).toHaveLength(3);
  });

  it("answers another user's endpoint and deliveries exactly as missing ones (404)", async () => {
    const { service } = make();
    const hook = await receiver();
    const { body } = await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${hook.base}/a` });
    const id = body.id as string;
    const missing = 'we_AAAAAAAAAAAAAAAAAAAAAA';
    for (const [method, path, payload] of [
      ['GET', `/v1/webhook-endpoints/${id}`],
      ['PATCH', `/v1/webhook-endpoints/${id}`, { description: 'mine now' }],
      ['POST', `/v1/webhook-endpoints/${id}/rotate-secret`],
      ['GET', `/v1/webhook-endpoints/${id}/deliveries`],
      ['POST', `/v1/webhook-endpoints/${id}/deliveries/msg_x/replay`],
      ['DELETE', `/v1/webhook-endpoints/${id}`],
    ] as const) {
      const theirs = await call(service, 'kb', method, path, payload);
      const none = await call(service, 'kb', method, path.replace(id, missing), payload);
      expect(theirs, `${method} ${path}`).toEqual(none);
      expect(theirs.status).toBe(404);
    }
    expect((await call(service, 'kb', 'GET', '/v1/webhook-endpoints')).body.data).toEqual([]);
    expect((await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${id}`)).body.description).toBeNull();
  });

  it('rotates: for the overlap every delivery carries signatures with both secrets', async () => {
    const { service } = make();
    await service.start();
    const hook = await receiver();
    const { body } = await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${hook.base}/a`, events: ['generation.completed'] });
    const rotated = await call(service, 'ka', 'POST', `/v1/webhook-endpoints/${body.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).not.toBe(body.secret);
    expect(Date.parse(rotated.body.previousSecretExpiresAt) - Date.parse(rotated.body.updatedAt)).toBe(24 * 3600_000);
    await generate(service, 'ka');
    await until(() => hook.received.length === 1, 'the delivery');
    const r = hook.received[0]!;
    expect(String(r.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const key of [body.secret, rotated.body.secret]) expect(() => new Webhook(key).verify(r.body, webhookHeaders(r))).not.toThrow();
  });

  it('lists deliveries with their attempts, and a replay sends the same message again (same webhook-id), signed', async () => {
    const { service } = make({}, { retrySchedule: [3_600_000] });
    await service.start();
    let accept = false;
    const hook = await receiver(() => (accept ? 200 : 500));
    const { body } = await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${hook.base}/a`, events: ['generation.completed'] });
    const gen = await generate(service, 'ka');
    await until(() => hook.received.length === 1, 'the first attempt');
    const deliveries = async () => (await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${body.id}/deliveries`)).body.data;
    await until(async () => (await deliveries())[0]?.attempts.length === 1, 'the attempt recorded');
    const [d] = await deliveries();
    expect(d).toMatchObject({ type: 'generation.completed', generationId: gen, url: `${hook.base}/a`, state: 'pending' });
    expect(d.attempts[0]).toMatchObject({ status: 500 });
    expect(typeof d.attempts[0].durationMs).toBe('number');
    expect(Date.parse(d.nextAttemptAt) - Date.parse(d.attempts[0].at)).toBeGreaterThanOrEqual(0.8 * 3_600_000);

    // Another user cannot replay (or see) it through an endpoint of their own.
    const bobs = (await call(service, 'kb', 'POST', '/v1/webhook-endpoints', { url: `${hook.base}/bob` })).body;
    expect((await call(service, 'kb', 'POST', `/v1/webhook-endpoints/${bobs.id}/deliveries/${d.id}/replay`)).status).toBe(404);
    expect((await call(service, 'kb', 'GET', `/v1/webhook-endpoints/${bobs.id}/deliveries`)).body.data).toEqual([]);
    expect(hook.received).toHaveLength(1);

    accept = true;
    const replay = await call(service, 'ka', 'POST', `/v1/webhook-endpoints/${body.id}/deliveries/${d.id}/replay`);
    expect(replay.status).toBe(202);
    expect(replay.body).toMatchObject({ id: d.id, state: 'pending' });
    await until(() => hook.received.length === 2, 'the replay');
    expect(hook.received[1]!.headers['webhook-id']).toBe(hook.received[0]!.headers['webhook-id']);
    expect(hook.received[1]!.body).toBe(hook.received[0]!.body);
    expect(() => new Webhook(body.secret).verify(hook.received[1]!.body, webhookHeaders(hook.received[1]!))).not.toThrow();
    await until(async () => (await deliveries())[0]?.state === 'delivered', 'delivered');
    expect((await deliveries())[0].attempts.map((a: { status: number }) => a.status)).toEqual([500, 200]);

    // A delivered one may be replayed too, and goes to the endpoint's URL as it is now; an unknown delivery is 404.
    const moved = await receiver();
    expect((await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${body.id}`, { url: `${moved.base}/b` })).status).toBe(200);
    expect((await call(service, 'ka', 'POST', `/v1/webhook-endpoints/${body.id}/deliveries/${d.id}/replay`)).status).toBe(202);
    await until(() => moved.received.length === 1, 'the second replay, at the new URL');
    expect(moved.received[0]!.headers['webhook-id']).toBe(d.id);
    expect(hook.received).toHaveLength(2);
    expect((await call(service, 'ka', 'POST', `/v1/webhook-endpoints/${body.id}/deliveries/msg_nope/replay`)).status).toBe(404);
    expect((await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${body.id}/deliveries?limit=0`)).status).toBe(400);
  });

  it('a 410 from an endpoint moved to a new URL stops that URL, not the deliveries of the URL it left', async () => {
    const logged: string[] = [];
    const log = (_obj: Record<string, unknown>, msg?: string): void => void logged.push(msg ?? '');
    const { service } = make({ logger: { debug: log, info: log, warn: log, error: log } }, { retrySchedule: [3_600_000] });
    await service.start();
    const old = await receiver(() => 500);
    const gone = await receiver(() => 410);
    const url = `${old.base}/a`;
    const ep = (await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url, events: ['generation.completed'] })).body;
    // The generation's own webhook goes to the URL the endpoint had: a receiver that failed once and never said 410.
    const gen = await generate(service, 'ka', { webhook: { url, events: ['generation.completed'] } });
    const ofGeneration = async () => (await call(service, 'ka', 'GET', `/v1/generations/${gen}/webhook-deliveries`)).body.data as Array<{ id: string; state: string; attempts: unknown[] }>;
    await until(async () => (await ofGeneration()).every((d) => d.attempts.length === 1) && (await ofGeneration()).length === 2, 'both first attempts recorded');
    const [ofEndpoint] = (await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${ep.id}/deliveries`)).body.data;

    expect((await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${ep.id}`, { url: `${gone.base}/b` })).status).toBe(200);
    expect((await call(service, 'ka', 'POST', `/v1/webhook-endpoints/${ep.id}/deliveries/${ofEndpoint.id}/replay`)).status).toBe(202);
    // The sender stops the URL after recording the attempt: wait for it to say so.
    await until(() => logged.some((m) => m.includes('410 Gone')), 'the 410 handled');
    expect((await ofGeneration()).find((d) => d.id === ofEndpoint.id)?.state).toBe('gone');
    expect(gone.received).toHaveLength(1);
    // The generation's own delivery to the old URL is still due: only the URL that answered 410 is stopped.
    expect((await ofGeneration()).find((d) => d.id !== ofEndpoint.id)?.state).toBe('pending');
  });

  it('an endpoint disabled after its URL changed is reported with its URL as it is now, in the audit log and to its siblings', async () => {
    const clock = new FakeClock(Date.UTC(2030, 0, 1));
    const minute = 60_000;
    const { service, webhookStore, auditLog } = make({ clock }, { pollIntervalMs: 10_000, retrySchedule: Array(20).fill(minute), disableEndpointAfterMs: 5 * minute });
    cleanups.push(() => stopOn(clock, service));
    await service.start();
    const first = await receiver(() => 500);
    const second = await receiver(() => 500);
    const fine = await receiver();
    const bad = (await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${first.base}/old`, events: ['generation.completed'] })).body;
    await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${fine.base}/good`, events: ['webhook_endpoint.disabled'] });
    await generate(service, 'ka');
    const idle = async () => (await webhookStore.endpointDeliveries(bad.id, 'alice', 10)).every((d) => d.leaseOwner === undefined);
    await until(async () => first.received.length === 1 && (await idle()), 'the first failed attempt');
    const moved = `${second.base}/new`;
    expect((await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${bad.id}`, { url: moved })).status).toBe(200);
    let steps = 0;
    while ((await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${bad.id}`)).body.status === 'enabled' && steps++ < 100) {
      await clock.advance(10_000);
      await until(idle, 'no attempt in flight');
    }
    expect(second.received.length).toBeGreaterThan(0);
    await until(async () => (await auditLog.list({ limit: 10 })).entries.length === 1, 'the audit line');
    expect((await auditLog.list({ limit: 10 })).entries[0]).toMatchObject({ action: 'webhook_endpoint.disable', details: { endpointId: bad.id, url: moved } });
    await clock.advance(10_000);
    await until(() => fine.received.length === 1, 'webhook_endpoint.disabled to the other endpoint');
    expect(JSON.parse(fine.received[0]!.body)).toMatchObject({ data: { endpointId: bad.id, url: moved } });
  });

  it('disables an endpoint that failed every attempt for the period: its owner\u2019s other endpoints are told, the audit log has a line', async () => {
    const clock = new FakeClock(Date.UTC(2030, 0, 1));
    const minute = 60_000;
    const { service, webhookStore, auditLog } = make({ clock }, { pollIntervalMs: 10_000, retrySchedule: Array(20).fill(minute), disableEndpointAfterMs: 5 * minute });
    cleanups.push(() => stopOn(clock, service));
    await service.start();
    const failing = await receiver(() => 500);
    const fine = await receiver();
    const bad = (await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${failing.base}/bad`, events: ['generation.completed'] })).body;
    const good = (await call(service, 'ka', 'POST', '/v1/webhook-endpoints', { url: `${fine.base}/good`, events: ['webhook_endpoint.disabled'] })).body;
    const bobs = await receiver();
    await call(service, 'kb', 'POST', '/v1/webhook-endpoints', { url: `${bobs.base}/bob` });
    await generate(service, 'ka');
    const status = async () => (await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${bad.id}`)).body.status as string;
    const idle = async () => (await webhookStore.endpointDeliveries(bad.id, 'alice', 10)).every((d) => d.leaseOwner === undefined);
    let steps = 0;
    while ((await status()) === 'enabled' && steps++ < 100) {
      await clock.advance(10_000);
      await until(idle, 'no attempt in flight');
    }
    expect(await status()).toBe('disabled');
    // Failing since the first attempt; disabled by the first failed attempt at least five minutes after it.
    const [d] = await webhookStore.endpointDeliveries(bad.id, 'alice', 10);
    const first = d!.history[0]!.at;
    const disabledAt = Date.parse((await call(service, 'ka', 'GET', `/v1/webhook-endpoints/${bad.id}`)).body.disabledAt);
    expect(disabledAt - first).toBeGreaterThanOrEqual(5 * minute);
    expect(disabledAt - first).toBeLessThan(8 * minute);
    expect(d!.state).toBe('failed');
    expect(d!.history.every((a) => a.status === 500)).toBe(true);

    await clock.advance(10_000);
    await until(() => fine.received.length === 1, 'webhook_endpoint.disabled to the other endpoint');
    const msg = fine.received[0]!;
    const sig = String(msg.headers['webhook-signature']);
    const expected = new Webhook(good.secret).sign(String(msg.headers['webhook-id']), new Date(Number(msg.headers['webhook-timestamp']) * 1000), msg.body);
    expect(sig).toBe(expected);
    expect(JSON.parse(msg.body)).toMatchObject({ type: 'webhook_endpoint.disabled', data: { endpointId: bad.id, url: `${failing.base}/bad`, reason: 'failing' } });
    expect(bobs.received).toHaveLength(0);
    const audit = await auditLog.list({ limit: 10 });
    expect(audit.entries).toHaveLength(1);
    expect(audit.entries[0]).toMatchObject({ actor: 'genservice', action: 'webhook_endpoint.disable', userId: 'alice', details: { endpointId: bad.id } });

    // No more attempts while disabled; a replay is refused until it is enabled again.
    const attempts = failing.received.length;
    await clock.advance(5 * minute);
    expect(failing.received).toHaveLength(attempts);
    expect((await call(service, 'ka', 'POST', `/v1/webhook-endpoints/${bad.id}/deliveries/${d!.id}/replay`)).status).toBe(409);
    const enabled = await call(service, 'ka', 'PATCH', `/v1/webhook-endpoints/${bad.id}`, { disabled: false });
    expect(enabled.body).toMatchObject({ status: 'enabled', disabledAt: null });
  });
});
