// The console with hostile account data: user ids are the operator's users' own strings (printable, 1 to 200
// characters), so they may read as spreadsheet formulas or as URL dot segments. In Chromium, as console.test.ts.
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, serveAtApi } from './browser.js';

const ADMIN_KEY = 'console-hostile-admin-key-0123456789abc';
/** Keys of the users "." and ".." (a host's resolver may answer any id): no URL path names them, so they are made in code. */
const DOT_KEYS: Record<string, string> = { '.': 'dot-user-key-0123456789abcdefghijkl', '..': 'dotdot-user-key-0123456789abcdefghij' };
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

const provider = {
  models: [{ modelId: 'pic', title: 'A picture', resultType: 'image' as const, estimatedGenerationTime: 1, price: 3, settings: [] }],
  generate: async () => ({ bytes: new Uint8Array(PNG), mimeType: 'image/png' }),
};

let browser: Browser;
const keys = new MemoryApiKeyStore();
const ledger = new MemoryLedger();
let service: GenerationService;
let server: Server;
let base: string;

beforeAll(async () => {
  service = createGenerationService({
    providers: [provider],
    apiKeys: keys,
    ledger,
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

async function api(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A user with 100 tokens and a key, who has run one generation to its end. */
async function userWithUsage(userId: string): Promise<string> {
  let apiKey = DOT_KEYS[userId];
  if (apiKey !== undefined) {
    await keys.addKey(apiKey, userId);
    await ledger.openAccount(userId, 100);
  } else {
    expect((await api('POST', '/v1/admin/users', ADMIN_KEY, { userId, balance: 100 })).status).toBe(201);
    const key = await api('POST', `/v1/admin/users/${encodeURIComponent(userId)}/keys`, ADMIN_KEY, { name: 'k', scopes: ['generate', 'read'] });
    expect(key.status, JSON.stringify(key.body)).toBe(201);
    apiKey = key.body.apiKey as string;
  }
  const created = await api('POST', '/v1/generations', apiKey, { modelId: 'pic' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  await expect.poll(async () => (await api('GET', `/v1/generations/${created.body.generationId}`, apiKey)).body.status, { timeout: 20_000 }).toBe('completed');
  return apiKey;
}

async function signIn(): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1500 }, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(5_000);
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', (d) => void d.accept());
  await page.goto(`${base}/console/`);
  await page.getByLabel('Admin key', { exact: true }).fill(ADMIN_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect.poll(() => page.locator('#signin-status').textContent()).toBe('Signed in.');
  return { page, problems };
}

/** The cells of an RFC 4180 text, quotes undone. */
function csvCells(text: string): string[] {
  const cells: string[] = [];
  const re = /(?:"((?:[^"]|"")*)"|([^,\r\n]*))(,|\r\n|$)/g;
  for (let m = re.exec(text); m !== null && m.index < text.length; m = re.exec(text)) {
    cells.push(m[1] !== undefined ? m[1].replace(/""/g, '"') : m[2]!);
    if (m[0] === '') re.lastIndex++;
  }
  return cells;
}

describe('the console with hostile user ids', () => {
  it('exports CSV whose cells never start a spreadsheet formula (=, +, -, @, tab, CR)', async () => {
    // (A tab or CR cannot start a user id: the ledger refuses control characters.)
    const formulas = ['=HYPERLINK("http://evil.example/","x")', '+1+1', '-2+3', '@SUM(1)'];
    for (const userId of formulas) await userWithUsage(userId);
    const { page, problems } = await signIn();
    await expect.poll(() => page.locator('#usage-days tbody tr').count(), { timeout: 20_000 }).toBe(4);
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const text = readFileSync((await (await download).path())!, 'utf8');
    const cells = csvCells(text).filter((c) => c !== '');
    for (const userId of formulas) expect(cells).toContain(`'${userId}`);
    expect(cells.filter((c) => /^[=+\-@\t\r]/.test(c))).toEqual([]);
    // Numbers stay numbers.
    expect(text).toMatch(/,1,3\r\n/);
    expect(problems).toEqual([]);
    await page.context().close();
  });

  it('a user id "." or ".." never sends a request to another route, and leaves the other users\' usage and log shown', async () => {
    const adaKey = await userWithUsage('dot-ada');
    await userWithUsage('.');
    await userWithUsage('..');
    const mine = (await api('GET', '/v1/generations', adaKey)).body.data.map((g: { generationId: string }) => g.generationId);
    const { page, problems } = await signIn();
    const paths: string[] = [];
    page.on('request', (r) => paths.push(new URL(r.url()).pathname));
    await page.getByRole('button', { name: 'Reload users and keys' }).click();
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('#usage-days').textContent(), { timeout: 5_000 }).toContain('dot-ada');
    await expect.poll(() => page.locator('#log').textContent(), { timeout: 5_000 }).toContain('dot-ada');
    await page.getByRole('button', { name: `Details of ${mine[0]}` }).click();
    await expect.poll(() => page.locator('#details-title').textContent()).toBe(`Generation ${mine[0]}`);
    // "." and ".." are dot segments: `users/./usage` is `users/usage` (the account of a user named "usage"), and
    // `users/../usage` is `/v1/admin/usage`. Whatever the page sends is under the user it means.
    const astray = paths.filter((p) => /^\/api\/v1\/admin\/(?:users\/$|users\/(?:usage|generations|webhook-endpoints|keys|credits)(?:\/|$)|(?:usage|generations|webhook-endpoints|keys)(?:\/|$)|$)/.test(p));
    expect(astray).toEqual([]);
    expect(problems).toEqual([]);
    await page.context().close();
  });
});
