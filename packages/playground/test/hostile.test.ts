// Issue 24, item 3: the page holds the caller's key, so it must talk to its own service only (a `?api=` link once
// pointed it at any origin, key included), and a result that is not an http(s) URL is never a link or a media source.
// A service in this process, served by plain node:http through @genservice/core/adapter, in Chromium.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { bodyLimitsOf, isApiPath, readRequestBody, writeNodeResponse } from '@genservice/core/adapter';
import { launchChromium } from './browser.js';

const KEY = 'hostile-test-key-0123456789abcdef';
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

const provider = {
  models: [{ modelId: 'pic', title: 'A picture', resultType: 'image' as const, estimatedGenerationTime: 1, price: 1, settings: [] }],
  generate: async () => ({ bytes: new Uint8Array(PNG), mimeType: 'image/png' }),
};

let service: GenerationService;
let server: Server;
let base: string;
/** Another origin on loopback that would gladly take the key: it allows every origin and counts what reaches it. */
let elsewhere: Server;
let elsewhereBase: string;
const elsewhereSeen: IncomingHttpHeaders[] = [];
let browser: Browser;

beforeAll(async () => {
  service = createGenerationService({
    providers: [provider],
    playground: true,
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: KEY, userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 100 } }),
  });
  await service.start();
  server = createServer(async (req, res) => {
    const path = req.url ?? '/';
    if (!isApiPath(path.split('?')[0]!)) return void res.writeHead(404).end();
    const body = await readRequestBody(req, bodyLimitsOf(service), req.headers['content-length']);
    await writeNodeResponse(res, await service.handle({ method: req.method ?? 'GET', path, headers: req.headers, ...body, remoteAddress: req.socket.remoteAddress }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  elsewhere = createServer((req, res) => {
    elsewhereSeen.push(req.headers);
    res.writeHead(req.method === 'OPTIONS' ? 204 : 200, {
      'access-control-allow-origin': req.headers.origin ?? '*',
      'access-control-allow-headers': 'authorization, content-type, idempotency-key, prefer, last-event-id',
      'access-control-allow-methods': 'GET, POST',
      'content-type': 'application/json',
    });
    res.end(req.method === 'OPTIONS' ? undefined : JSON.stringify({ data: [] }));
  });
  // `localhost` rather than 127.0.0.1: another origin than the page's, as a link to a foreign host would be.
  await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
  elsewhereBase = `http://localhost:${(elsewhere.address() as AddressInfo).port}`;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  elsewhere?.closeAllConnections();
  await new Promise((resolve) => elsewhere?.close(resolve));
  await new Promise((resolve) => server?.close(resolve));
  await service?.stop();
});

describe('the playground talks to its own service only (issue 24, item 3)', () => {
  it('ignores ?api= pointing elsewhere: the key goes to the page’s own service and nowhere else', async () => {
    const page = await browser.newPage();
    const requested: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    await page.goto(`${base}/playground/?api=${encodeURIComponent(`${elsewhereBase}/`)}`);
    await page.getByLabel('API key', { exact: true }).fill(KEY);
    await page.getByRole('button', { name: 'Connect' }).click();
    // Either the page loaded its models, or it went elsewhere: whichever comes first, the key must not have left.
    await expect.poll(async () => elsewhereSeen.length > 0 || (await page.getByLabel('Model', { exact: true }).inputValue()) === 'pic').toBe(true);
    expect(elsewhereSeen.map((h) => h.authorization).filter(Boolean)).toEqual([]);
    expect(elsewhereSeen).toEqual([]);
    expect(requested.filter((u) => !u.startsWith(`${base}/`))).toEqual([]);
    expect(requested).toContain(`${base}/v1/models`);
    await page.close();
  });

  it('shows a result that is not an http(s) URL as text, never as a link or a media source', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const hostile = 'javascript:document.title="pwned"';
    // A hostile answer for the finished generation: an image model whose result is a javascript: URL.
    await page.route(/\/v1\/generations\/[^/]+\/events$/, async (route) => {
      const id = new URL(route.request().url()).pathname.split('/').at(-2)!;
      const item = { id, status: 'completed', modelId: 'pic', result: hostile, price: 1 };
      await route.fulfill({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: `id: 3\nevent: completed\ndata: ${JSON.stringify(item)}\n\n` });
    });
    await page.goto(`${base}/playground/`);
    await page.getByLabel('API key', { exact: true }).fill(KEY);
    await page.getByRole('button', { name: 'Connect' }).click();
    await expect.poll(() => page.getByLabel('Model', { exact: true }).inputValue()).toBe('pic');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await expect.poll(() => page.locator('#result').textContent()).toContain(hostile);
    const sources = await page.locator('#result [href], #result [src]').evaluateAll((els) => els.map((e) => e.getAttribute('href') ?? e.getAttribute('src')));
    expect(sources.filter((s) => !/^https?:/.test(s ?? ''))).toEqual([]);
    expect(await page.locator('#result .text-result').textContent()).toBe(hostile);
    expect(await page.title()).not.toBe('pwned');
    expect(errors).toEqual([]);
    await page.close();
  });
});
