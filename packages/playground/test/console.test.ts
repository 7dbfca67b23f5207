// The operator console and the user's page in a real browser (Debian's Chromium through playwright-core) against a
// service with the demo models: sign in with the admin key, create a user and a key with a budget, run generations,
// see them in the log (thumbnails, text, a failure, details with events) and in the usage chart (read from the page),
// export CSV, revoke the key; the user's page; an axe-core scan; no request to any other origin. Screenshots of both
// pages are the ones in docs/console.md.
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { createDemoProvider } from '@genservice/demo-models';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, serveAtApi } from './browser.js';

const ADMIN_KEY = 'console-admin-key-0123456789abcdefghij';
const DOCS = fileURLToPath(new URL('../../../docs/', import.meta.url));

let browser: Browser;
let service: GenerationService;
let server: Server;
let base: string;

beforeAll(async () => {
  service = createGenerationService({
    providers: [createDemoProvider({ speed: 0.02, imageWorkers: 0 })],
    apiKeys: new MemoryApiKeyStore(),
    ledger: new MemoryLedger(),
    trustRequestHost: true,
    console: true,
    admin: { apiKeys: [{ key: ADMIN_KEY, name: 'ops' }] },
  });
  await service.start();
  ({ server, base } = await serveAtApi(service));
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
  await service?.stop();
});

/** A page that records every request's origin, CSP refusals and script errors. */
async function open(path: string, bypassCSP = false): Promise<{ page: Page; problems: string[]; origins: Set<string> }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1500 }, bypassCSP, acceptDownloads: true });
  const page = await context.newPage();
  const problems: string[] = [];
  const origins = new Set<string>();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('request', (r) => {
    if (/^https?:/.test(r.url())) origins.add(new URL(r.url()).origin);
  });
  page.on('dialog', (d) => void d.accept());
  await page.goto(`${base}${path}`);
  return { page, problems, origins };
}

async function api(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function runToEnd(key: string, modelId: string, prompt: string): Promise<any> {
  const created = await api('POST', '/v1/generations', key, { modelId, settings: { prompt } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  let item: any;
  await expect
    .poll(async () => {
      item = (await api('GET', `/v1/generations/${created.body.generationId}`, key)).body;
      return item.status;
    }, { timeout: 20_000 })
    .toMatch(/^(completed|failed)$/);
  return { ...item, generationId: created.body.generationId };
}

async function axeScan(page: Page, state: string): Promise<void> {
  await page.addScriptTag({ content: readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8') });
  const violations = await page.evaluate(async () => {
    const r = await (window as any).axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v: any) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n: any) => n.target.join(' ')) }));
  });
  const bad = violations.filter((v: { impact: string }) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad, `${state}: ${JSON.stringify(bad, null, 1)}`).toEqual([]);
}

/** The numbers a Chart.js chart on the page holds: label -> values, read from the chart itself. */
function chartData(page: Page, canvasId: string): Promise<{ labels: string[]; sets: Record<string, number[]> }> {
  return page.evaluate((id) => {
    const chart = (window as any).Chart.getChart(document.getElementById(id));
    return { labels: chart.data.labels, sets: Object.fromEntries(chart.data.datasets.map((d: any) => [d.label, d.data])) };
  }, canvasId);
}

let userKey = '';

describe('the operator console', () => {
  it('signs in with the admin key, creates a user and a budgeted key, shows generations, usage and the queue, revokes the key', async () => {
    const { page, problems, origins } = await open('/console/');
    await expect.poll(() => page.getByLabel('Admin key', { exact: true }).isVisible()).toBe(true);
    await page.getByLabel('Admin key', { exact: true }).fill('not-the-key-0123456789012345678901');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.locator('#signin-status').textContent()).toMatch(/not an admin key/);
    await page.getByLabel('Admin key', { exact: true }).fill(ADMIN_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.locator('#signin-status').textContent()).toBe('Signed in.');
    // The key is in the page's memory only: not in its URL, storage or the field.
    expect(page.url()).not.toContain(ADMIN_KEY);
    expect(await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie)).toBe('{}{}');
    expect(await page.getByLabel('Admin key', { exact: true }).inputValue()).toBe('');

    // Organisations: a table when the service has the organisation routes (issue 40), else a line saying so.
    const paths = Object.keys(((await (await fetch(`${base}/v1/openapi.json`)).json()) as { paths: object }).paths);
    if (paths.includes('/v1/admin/organizations/{organizationId}')) {
      expect((await api('POST', '/v1/admin/organizations', ADMIN_KEY, { organizationId: 'acme', budget: { amount: 1000, period: 'month' } })).status).toBe(201);
      await page.getByRole('button', { name: 'Reload users and keys' }).click();
      await expect.poll(() => page.locator('#orgs tbody tr').first().textContent()).toContain('acme1,000 / month');
    } else {
      await expect.poll(() => page.locator('#orgs-status').textContent()).toBe('Organisations: this service has no organisation routes.');
    }
    await page.getByLabel('New user id').fill('ada');
    await page.getByLabel('Starting balance').fill('5000');
    await page.getByRole('button', { name: 'Create user' }).click();
    await expect.poll(() => page.locator('#user-status').textContent()).toBe('Created ada with 5,000 tokens.');
    await expect.poll(() => page.locator('#users tbody tr').first().textContent()).toContain('ada5,000');

    await page.getByLabel('Key name').fill('ci-key');
    await page.getByLabel('Budget (tokens)').fill('400');
    await page.getByLabel('Budget period').selectOption('day');
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect.poll(() => page.locator('#key-secret').textContent()).toMatch(/^gs_/);
    userKey = (await page.locator('#key-secret').textContent())!;
    await expect.poll(() => page.locator('#keys tbody tr').count()).toBe(1);
    expect(await page.locator('#keys tbody tr').first().textContent()).toContain('400 / day');

    const image1 = await runToEnd(userKey, 'demo-image', 'a lighthouse');
    const image2 = await runToEnd(userKey, 'demo-image', 'a red fox');
    const text = await runToEnd(userKey, 'demo-text', 'a haiku');
    const failed = await runToEnd(userKey, 'demo-always-fails', 'nothing');
    expect([image1.status, image2.status, text.status, failed.status]).toEqual(['completed', 'completed', 'completed', 'failed']);
    const spent = image1.price + image2.price + text.price + failed.price;

    // The log: each row with its result; images as thumbnails that loaded.
    await page.getByLabel('User', { exact: true }).selectOption('ada');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('#log tbody tr').count()).toBe(4);
    await expect
      .poll(() => page.locator('#log img.thumb').evaluateAll((imgs) => imgs.map((i) => (i as HTMLImageElement).complete && (i as HTMLImageElement).naturalWidth > 0)))
      .toEqual([true, true]);
    expect(await page.locator('#log .text-result').textContent()).toBe(String(text.result).slice(0, 120));
    expect(await page.locator('#log .failure').count()).toBe(1);
    await page.getByLabel('Status', { exact: true }).selectOption('failed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('#log tbody tr').count()).toBe(1);
    await page.getByLabel('Status', { exact: true }).selectOption('');
    await page.getByLabel('Model', { exact: true }).fill('demo-image');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('#log tbody tr').count()).toBe(2);
    await page.getByRole('button', { name: `Details of ${image1.generationId}` }).click();
    await expect.poll(() => page.locator('#details').isVisible()).toBe(true);
    const events = await page.locator('#events tbody td:nth-child(2)').allTextContents();
    expect([events[0], events[1], events.at(-1)]).toEqual(['created', 'processing', 'completed']);
    await page.getByRole('button', { name: 'Close' }).click();

    // Usage, read from the page: the chart's own data and the table beside it.
    await page.getByRole('button', { name: 'Show' }).click();
    await expect.poll(async () => (await chartData(page, 'usage-daily')).sets.ada?.reduce((a, b) => a + b, 0)).toBe(spent);
    const daily = await chartData(page, 'usage-daily');
    expect(daily.sets.generations!.reduce((a, b) => a + b, 0)).toBe(4);
    const byModel = await chartData(page, 'usage-breakdown');
    expect(Object.fromEntries(byModel.labels.map((l, i) => [l, byModel.sets.tokens![i]]))).toEqual({
      'demo-always-fails': failed.price,
      'demo-image': image1.price + image2.price,
      'demo-text': text.price,
    });
    expect(await page.locator('#usage-days tbody tr td:nth-child(4)').allTextContents()).toEqual([String(spent)]);
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const csv = readFileSync((await (await download).path())!, 'utf8');
    expect(csv).toMatch(new RegExp(`^day,user,generations,tokens\\r\\n\\d{4}-\\d\\d-\\d\\d,ada,4,${spent}\\r\\n`));
    expect(csv).toContain(`demo-image,2,${image1.price + image2.price}`);

    // Keys: the budget's spend; the queue: nothing waits, the failure is counted.
    await page.getByRole('button', { name: 'Reload users and keys' }).click();
    await expect.poll(() => page.locator('#keys tbody tr').first().textContent()).toContain(`400 / day${spent}${spent}`);
    await page.getByRole('button', { name: 'Refresh queue' }).click();
    await expect.poll(() => page.locator('#queue-failures').textContent()).toBe('1');
    expect(await page.locator('#queue-pending').textContent()).toBe('0');

    await page.screenshot({ path: `${DOCS}console.png`, fullPage: true });

    await page.getByRole('button', { name: 'Revoke ci-key' }).click();
    await expect.poll(() => page.locator('#keys-status').textContent()).toBe('Revoked ci-key.');
    await expect.poll(() => page.locator('#keys tbody tr').count()).toBe(0);
    expect((await api('GET', '/v1/balance', userKey)).status).toBe(401);

    expect(problems).toEqual([]);
    expect([...origins]).toEqual([new URL(base).origin]);
  });

  it('sends a CSP that names no other origin, for every file of both pages', async () => {
    for (const path of ['/console/', '/console/me', '/console/console.js', '/console/shared.js', '/console/chart.js', '/console/style.css']) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      const csp = res.headers.get('content-security-policy') ?? '';
      const sources = csp.split(';').flatMap((d) => d.trim().split(/\s+/).slice(1));
      expect(sources.filter((s) => !["'self'", "'none'", 'data:', 'blob:'].includes(s)), path).toEqual([]);
    }
  });

  it('shows a user their balance, usage chart, keys and generations at console/me', async () => {
    const key = await api('POST', '/v1/admin/users/ada/keys', ADMIN_KEY, { name: 'ada-own', scopes: ['generate', 'read'] });
    expect(key.status).toBe(201);
    const image = await runToEnd(key.body.apiKey, 'demo-image', 'a tree');
    const { page, problems, origins } = await open('/console/me');
    await page.getByLabel('API key', { exact: true }).fill(key.body.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.locator('#signin-status').textContent()).toBe('Signed in.');
    const balance = (await api('GET', '/v1/balance', key.body.apiKey)).body.balance as number;
    await expect.poll(() => page.locator('#balance').textContent()).toBe(balance.toLocaleString('en-US'));
    await expect.poll(() => page.locator('#gens tbody tr').count()).toBe(5);
    await expect
      .poll(() => page.locator('#gens img.thumb').first().evaluate((i) => (i as HTMLImageElement).complete && (i as HTMLImageElement).naturalWidth > 0))
      .toBe(true);
    expect(await page.locator('#keys tbody tr').allTextContents()).toEqual([expect.stringContaining('ada-own')]);
    await expect.poll(async () => (await chartData(page, 'usage-daily')).sets.generations?.reduce((a, b) => a + b, 0)).toBe(5);
    const byModel = await chartData(page, 'usage-breakdown');
    expect(byModel.labels).toContain('demo-image');
    expect(image.status).toBe('completed');
    await page.screenshot({ path: `${DOCS}console-me.png`, fullPage: true });
    expect(problems).toEqual([]);
    expect([...origins]).toEqual([new URL(base).origin]);

    // A key without the read scope: the page says it may not list keys.
    const writer = await api('POST', '/v1/admin/users/ada/keys', ADMIN_KEY, { name: 'writer', scopes: ['generate'] });
    expect((await api('GET', '/v1/keys', writer.body.apiKey)).status).toBe(403);
  });

  it('fits a phone-width screen: nothing wider than the window but the tables, which scroll in their panels', async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await context.newPage();
    await page.goto(`${base}/console/`);
    await page.getByLabel('Admin key', { exact: true }).fill(ADMIN_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.locator('#log tbody tr').count()).toBeGreaterThan(0);
    const wide = await page.evaluate(() =>
      Array.from(document.querySelectorAll('body *'))
        .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 && (!e.closest('.scroll') || e.classList.contains('scroll')))
        .map((e) => `${e.tagName}#${e.id}.${e.className}`)
        .slice(0, 10),
    );
    expect(wide).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    const me = await context.newPage();
    await me.goto(`${base}/console/me`);
    expect(await me.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    await context.close();
  });

  it('has no serious or critical axe-core violations, signed out and signed in, on both pages', async () => {
    const { page } = await open('/console/', true);
    await axeScan(page, 'console, signed out');
    await page.getByLabel('Admin key', { exact: true }).fill(ADMIN_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.locator('#log tbody tr').count()).toBeGreaterThan(0);
    await axeScan(page, 'console, signed in');
    const me = await open('/console/me', true);
    await axeScan(me.page, 'me, signed out');
    const key = await api('POST', '/v1/admin/users/ada/keys', ADMIN_KEY, { name: 'axe' });
    await me.page.getByLabel('API key', { exact: true }).fill(key.body.apiKey);
    await me.page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => me.page.locator('#gens tbody tr').count()).toBeGreaterThan(0);
    await axeScan(me.page, 'me, signed in');
  });
});
