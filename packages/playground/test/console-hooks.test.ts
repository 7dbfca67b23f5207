// The console's webhook deliveries in Chromium, on a service whose clock the test moves (FakeClock): a delivery that
// failed is replayed from the page to a loopback receiver that then accepts it, and an endpoint that fails every
// attempt for the service's period shows as disabled. The screenshot of the panel is the one in docs/console.md.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { bodyLimitsOf, handleNodeRequest, isApiPath, writeNodeResponse } from '@genservice/core/adapter';
import { FakeClock, until } from '@genservice/testing';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './browser.js';

const ADMIN_KEY = 'console-hooks-admin-key-0123456789abcdef';
const USER_KEY = 'console-hooks-user-key-0123456789abcdef';
const DOCS = fileURLToPath(new URL('../../../docs/', import.meta.url));
const MINUTE = 60_000;

let browser: Browser;
let service: GenerationService;
let clock: FakeClock;
let api: Server;
let base: string;
/** Receivers on loopback: each answers with what its `status()` says now. */
const receivers: Array<{ server: Server; url: string; hits: number[] }> = [];

async function receiver(status: () => number): Promise<{ url: string; hits: number[] }> {
  const hits: number[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => {
      const s = status();
      hits.push(s);
      res.writeHead(s).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const r = { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, hits };
  receivers.push(r);
  return r;
}

beforeAll(async () => {
  clock = new FakeClock(Date.UTC(2030, 0, 1));
  service = createGenerationService({
    providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }], generate: async () => ({ text: 'hello' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: USER_KEY, userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 1000 } }),
    clock,
    recovery: { intervalMs: 0 },
    trustRequestHost: true,
    console: true,
    admin: { apiKeys: [{ key: ADMIN_KEY, name: 'ops' }] },
    webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10_000, retrySchedule: Array(20).fill(MINUTE), disableEndpointAfterMs: 5 * MINUTE },
  });
  await service.start();
  const limits = bodyLimitsOf(service);
  api = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (!isApiPath(path, service)) return void res.writeHead(404).end();
    handleNodeRequest(service, req, { limits, origin: () => base, remoteAddress: req.socket.remoteAddress }).then((out) => writeNodeResponse(res, out));
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => api?.close(resolve));
  for (const r of receivers) {
    r.server.closeAllConnections();
    await new Promise((resolve) => r.server.close(resolve));
  }
  if (service) {
    let stopped = false;
    const stop = service.stop({ timeoutMs: 100 }).then(() => (stopped = true));
    while (!stopped) await clock.advance(100);
    await stop;
  }
});

async function call(method: string, path: string, key: string, body?: unknown): Promise<any> {
  const r = await service.handle({
    method,
    path,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = String(r.body ?? '');
  return { status: r.status, body: text ? JSON.parse(text) : undefined };
}

async function generate(): Promise<string> {
  const r = await call('POST', '/v1/generations', USER_KEY, { modelId: 'ok' });
  expect(r.status).toBe(201);
  await until(async () => (await call('GET', `/v1/generations/${r.body.generationId}`, USER_KEY)).body.status === 'completed', { what: 'the generation', timeoutMs: 10_000 });
  return r.body.generationId as string;
}

/** Moves the service's clock a poll interval at a time until `check` holds. */
async function advanceUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await clock.advance(10_000);
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`never: ${what}`);
}

async function signIn(page: Page): Promise<void> {
  await page.goto(`${base}/console/`);
  await page.getByLabel('Admin key', { exact: true }).fill(ADMIN_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect.poll(() => page.locator('#signin-status').textContent()).toBe('Signed in.');
}

describe('webhook deliveries in the console', () => {
  it('replays a failed delivery to a receiver that then accepts it, and shows an endpoint disabled after its failure period', async () => {
    let accept = false;
    const flaky = await receiver(() => (accept ? 204 : 500));
    const broken = await receiver(() => 500);
    const good = (await call('POST', '/v1/webhook-endpoints', USER_KEY, { url: flaky.url, events: ['generation.completed'], description: 'flaky' })).body;
    const bad = (await call('POST', '/v1/webhook-endpoints', USER_KEY, { url: broken.url, events: ['generation.completed'], description: 'broken' })).body;
    // The console lists the users the audit log names: the admin API opens alice's account for it.
    expect((await call('POST', '/v1/admin/users/alice/credits', ADMIN_KEY, { amount: 1, reason: 'console test' })).status).toBe(200);
    const generationId = await generate();
    const deliveries = async (id: string) => (await call('GET', `/v1/webhook-endpoints/${id}/deliveries`, USER_KEY)).body.data;
    await advanceUntil(async () => (await deliveries(good.id))[0]?.attempts.length === 1 && (await deliveries(bad.id))[0]?.attempts.length === 1, 'the first attempts');

    const page = await (await browser.newContext({ viewport: { width: 1280, height: 1400 } })).newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
    });
    await signIn(page);
    await page.getByLabel('Endpoints of').selectOption('alice');
    await expect.poll(() => page.locator('#endpoints tbody tr').count()).toBe(2);
    await page.getByRole('button', { name: `Show deliveries of ${flaky.url}` }).click();
    await expect.poll(() => page.locator('#deliveries tbody tr').count()).toBe(1);
    const row = page.locator('#deliveries tbody tr').first();
    expect(await row.textContent()).toContain(generationId);
    expect(await row.locator('.attempts li').allTextContents()).toEqual([expect.stringMatching(/^500 in \d+ ms at 2030-01-01 /)]);

    accept = true;
    await row.getByRole('button', { name: /^Replay/ }).click();
    await expect.poll(() => page.locator('#hooks-status').textContent()).toMatch(/^(Replaying|1 delivery)/);
    await advanceUntil(async () => (await deliveries(good.id))[0]?.state === 'delivered', 'the replay delivered');
    await page.getByRole('button', { name: 'Reload deliveries' }).click();
    await expect.poll(() => page.locator('#deliveries tbody tr .delivery').first().textContent()).toBe('delivered');
    expect(await page.locator('#deliveries tbody tr').first().locator('.attempts li').allTextContents()).toEqual([
      expect.stringMatching(/^500 /),
      expect.stringMatching(/^204 /),
    ]);
    expect(flaky.hits).toEqual([500, 204]);

    // The broken endpoint fails every attempt: after five minutes of failures the service disables it.
    await advanceUntil(async () => (await call('GET', `/v1/webhook-endpoints/${bad.id}`, USER_KEY)).body.status === 'disabled', 'the endpoint disabled');
    await page.getByRole('button', { name: 'Reload deliveries' }).click();
    await expect.poll(() => page.locator('#endpoints tbody tr', { hasText: broken.url }).locator('.endpoint').textContent()).toMatch(/^disabled 2030-01-01 /);
    await page.getByRole('button', { name: `Show deliveries of ${broken.url}` }).click();
    await expect.poll(() => page.locator('#deliveries tbody tr .delivery').first().textContent()).toBe('failed');
    expect((await page.locator('#deliveries tbody tr').first().locator('.attempts li').allTextContents()).length).toBeGreaterThanOrEqual(5);
    await page.locator('section[aria-labelledby="deliveries-h"]').screenshot({ path: `${DOCS}console-deliveries.png` });
    expect(problems).toEqual([]);
  });
});
