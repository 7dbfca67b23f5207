// The playground page in a real browser (Debian's Chromium through playwright-core) against the example hosts:
// every demo model through the form's labels to a loaded result, field errors, failures, 401/402/429, history,
// keyboard use, a phone-width screen and an axe-core scan. Screenshots of each result go to test-artifacts/.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, tempData, type RunningHost, type TempData } from '../../../examples/test/helpers.js';
import { ARTIFACTS, launchChromium } from './browser.js';

const ALICE = 'alice-playground-key-0123456789';
const POOR = 'poor-playground-key-0123456789';
const BUSY = 'busy-playground-key-0123456789';
const CAROL = 'carol-playground-key-0123456789';

let browser: Browser;
let data: TempData;
let host: RunningHost;

beforeAll(async () => {
  data = tempData([
    { id: 'alice', apiKey: ALICE, balance: 100_000 },
    { id: 'poor', apiKey: POOR, balance: 2 },
    { id: 'busy', apiKey: BUSY, balance: 100_000 },
    { id: 'carol', apiKey: CAROL, balance: 100_000 },
  ]);
  // The demo models' media inputs are the host's own file URLs (loopback), hence ALLOW_PRIVATE_MEDIA.
  host = await startHost('express', { USERS_FILE: data.usersFile, DATA_DIR: join(data.dir, 'express'), DEMO_SPEED: '0.05', ALLOW_PRIVATE_MEDIA: '1' });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await host?.stop();
  data?.cleanup();
});

/** A page whose scripts may only come from the page's own files: any CSP violation or script error fails the test. */
async function newPage(context?: BrowserContext, viewport = { width: 1100, height: 1300 }): Promise<{ page: Page; problems: string[] }> {
  const page = await (context ?? browser).newPage({ viewport });
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  return { page, problems };
}

async function connect(page: Page, base: string, key: string): Promise<void> {
  await page.goto(`${base}/playground`);
  await page.getByLabel('API key', { exact: true }).fill(key);
  await page.getByRole('button', { name: 'Connect' }).click();
  await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
}

type Fill = Record<string, string>;

/** Chooses the model and fills its form through the labels (text areas and inputs typed, selects chosen). */
async function fillForm(page: Page, modelId: string, fill: Fill): Promise<void> {
  await page.getByLabel('Model', { exact: true }).selectOption(modelId);
  for (const [label, value] of Object.entries(fill)) {
    const control = page.getByLabel(label, { exact: true });
    if ((await control.evaluate((el) => el.tagName)) === 'SELECT') await control.selectOption(value);
    else await control.fill(value);
  }
}

async function generate(page: Page, modelId: string, fill: Fill): Promise<'completed' | 'failed'> {
  await fillForm(page, modelId, fill);
  // The price of these settings is shown before Generate is pressed.
  await expect.poll(() => page.locator('#price').textContent()).toMatch(/^\d+ tokens?$/);
  const status = page.locator('#status');
  const previous = await status.getAttribute('data-generation');
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  // This generation's end, not the one shown before it.
  await page.waitForFunction(
    (prev) => {
      const el = document.getElementById('status')!;
      return el.dataset.generation !== undefined && el.dataset.generation !== prev && (el.dataset.state === 'completed' || el.dataset.state === 'failed');
    },
    previous ?? undefined,
    { timeout: 30_000 },
  );
  return (await status.getAttribute('data-state')) as 'completed' | 'failed';
}

async function keepScreenshot(page: Page, name: string): Promise<void> {
  await page.locator('#result').scrollIntoViewIfNeeded();
  await page.locator('#result').screenshot({ path: join(ARTIFACTS, `${name}.png`) });
}

/** Share of the 3D view's pixels that differ from its clear colour: a drawn model covers a good part of it. */
function drawnShare(page: Page): Promise<number> {
  return page.locator('canvas.viewer').evaluate((canvas: HTMLCanvasElement) => {
    const copy = document.createElement('canvas');
    copy.width = canvas.width;
    copy.height = canvas.height;
    const ctx = copy.getContext('2d')!;
    ctx.drawImage(canvas, 0, 0);
    const { data } = ctx.getImageData(0, 0, copy.width, copy.height);
    let drawn = 0;
    // The clear colour is (0.95, 0.96, 0.98) -> about (242, 245, 250).
    for (let i = 0; i < data.length; i += 4) if (Math.abs(data[i]! - 242) + Math.abs(data[i + 1]! - 245) + Math.abs(data[i + 2]! - 250) > 24) drawn++;
    return drawn / (data.length / 4);
  });
}

describe('the playground page on the Express example host', () => {
  it('is served at <mount>/playground with its own files only, and asks for the key first', async () => {
    const { page, problems } = await newPage();
    const res = await page.goto(`${host.api}/playground`);
    expect(res!.status()).toBe(200);
    expect(page.url()).toBe(`${host.api}/playground/`);
    expect(res!.headers()['content-security-policy']).toContain("script-src 'self'");
    await expect.poll(() => page.getByLabel('Model', { exact: true }).isDisabled()).toBe(true);
    await expect.poll(() => page.getByRole('button', { name: 'Generate', exact: true }).isDisabled()).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('runs every demo model from the form to a result that really loaded', async () => {
    const { page, problems } = await newPage();
    await connect(page, host.api, ALICE);
    // Every model of the service is offered, grouped by its result type; the hint gives its time.
    const options = await page.getByLabel('Model', { exact: true }).locator('optgroup[label="Image"] option').allTextContents();
    expect(options).toEqual(expect.arrayContaining(['Demo image (PNG drawn from the prompt)']));
    expect(await page.getByLabel('Model', { exact: true }).locator('option').count()).toBeGreaterThanOrEqual(7);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-image');
    expect(await page.locator('#model-info').textContent()).toMatch(/^Demo image \(PNG drawn from the prompt\): Image result, takes about \d+ s\. Id: demo-image\.$/);

    // image
    expect(await generate(page, 'demo-image', { Prompt: 'a lighthouse at dusk', Size: '256x256' })).toBe('completed');
    const img = page.locator('#result img');
    await expect.poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(256);
    expect(await page.locator('#result .price-line').textContent()).toMatch(/^Price: \d+ tokens?$/);
    const imageUrl = (await img.getAttribute('src'))!;
    await keepScreenshot(page, 'image');

    // image to image: the URL list takes the image just made
    await fillForm(page, 'demo-image-remix', { Prompt: 'make it blue' });
    await page.getByLabel('Input images (PNG is decoded; other formats seed a pattern) URL 1', { exact: true }).fill(imageUrl);
    await page.getByRole('button', { name: /^Add a URL to Input images/ }).click();
    await page.getByLabel('Input images (PNG is decoded; other formats seed a pattern) URL 2', { exact: true }).fill(imageUrl);
    await page.getByRole('button', { name: /^Remove Input images .* URL 2$/ }).click();
    expect(await page.locator('[data-setting="images"] input[type="url"]').count()).toBe(1);
    expect(await generate(page, 'demo-image-remix', {})).toBe('completed');
    await expect.poll(() => page.locator('#result img').evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth > 0)).toBe(true);
    await keepScreenshot(page, 'image-remix');

    // video: metadata loaded (H.264 in MP4, which Chromium plays)
    expect(await generate(page, 'demo-video', { Prompt: 'waves', 'Frame size': '160x120', 'Duration (seconds)': '2' })).toBe('completed');
    const video = page.locator('#result video');
    expect(await video.getAttribute('controls')).not.toBeNull();
    await expect.poll(() => video.evaluate((el: HTMLVideoElement) => el.readyState >= 1 && el.duration > 0 && el.videoWidth > 0), { timeout: 15_000 }).toBe(true);
    await keepScreenshot(page, 'video');

    // audio
    expect(await generate(page, 'demo-audio', { Prompt: 'a calm tune' })).toBe('completed');
    const audio = page.locator('#result audio');
    expect(await audio.getAttribute('controls')).not.toBeNull();
    await expect.poll(() => audio.evaluate((el: HTMLAudioElement) => el.readyState >= 1 && el.duration > 0), { timeout: 15_000 }).toBe(true);
    await keepScreenshot(page, 'audio');

    // 3d: the GLB drawn in WebGL, and turned by the keyboard
    expect(await generate(page, 'demo-3d', { Prompt: 'a small planet', Shape: 'torus' })).toBe('completed');
    const canvas = page.locator('canvas.viewer');
    await expect.poll(() => canvas.getAttribute('data-drawn'), { timeout: 15_000 }).toBe('true');
    const before = await drawnShare(page);
    expect(before).toBeGreaterThan(0.05);
    const pixelsBefore = await canvas.evaluate((c: HTMLCanvasElement) => c.toDataURL());
    await canvas.focus();
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => canvas.evaluate((c: HTMLCanvasElement) => c.toDataURL())).not.toBe(pixelsBefore);
    await keepScreenshot(page, '3d');

    // text
    expect(await generate(page, 'demo-text', { Prompt: 'tides', Length: 'short' })).toBe('completed');
    expect((await page.locator('#result .text-result').textContent())!.length).toBeGreaterThan(40);
    await keepScreenshot(page, 'text');

    // a failing model: its reason and its price
    expect(await generate(page, 'demo-always-fails', { Prompt: 'anything' })).toBe('failed');
    const failure = page.locator('#result .failure');
    expect(await failure.getAttribute('data-code')).toBe('provider_error');
    expect((await failure.textContent())!).toMatch(/^Why it failed: .+on purpose.*Code provider_error\.$/);
    expect(await page.locator('#result .price-line').textContent()).toMatch(/^Price: \d+ tokens?$/);
    await keepScreenshot(page, 'failed');
    await page.screenshot({ path: join(ARTIFACTS, 'page.png'), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('answers of the API shown next to what caused them', () => {
  it('401: a key the service does not know is marked at the key field', async () => {
    const { page, problems } = await newPage();
    await page.goto(`${host.api}/playground`);
    await page.getByLabel('API key', { exact: true }).fill('not-a-key-of-this-service');
    await page.getByRole('button', { name: 'Connect' }).click();
    const error = page.locator('#api-key-error');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/did not accept this API key/);
    expect(await page.getByLabel('API key', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByLabel('Model', { exact: true }).isDisabled()).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('a required setting left empty is marked before anything is sent; 400 details land on their fields', async () => {
    const { page, problems } = await newPage();
    await connect(page, host.api, ALICE);
    const creates: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/v1/generations')) creates.push(r.url());
    });
    await fillForm(page, 'demo-image-remix', {});
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    const promptError = page.locator('[data-setting="prompt"] .error');
    await promptError.waitFor();
    expect(await promptError.textContent()).toBe('Prompt is required.');
    expect(await page.getByLabel('Prompt', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('setting-prompt');
    expect(creates).toEqual([]);

    // Hostile URLs pass the page (it leaves URL rules to the API) and come back as the API's details, per URL.
    const balanceBefore = await page.locator('#balance').textContent();
    await page.getByLabel('Prompt', { exact: true }).fill('remix');
    const label = 'Input images (PNG is decoded; other formats seed a pattern)';
    await page.getByLabel(`${label} URL 1`, { exact: true }).fill('ftp://example.com/a.png');
    await page.getByRole('button', { name: /^Add a URL to Input images/ }).click();
    await page.getByLabel(`${label} URL 2`, { exact: true }).fill('http://user:secret@example.com/a.png');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    const imagesError = page.locator('[data-setting="images"] > .error');
    await imagesError.waitFor();
    expect(await imagesError.textContent()).toMatch(/^URL 1: .+ URL 2: .+$/);
    expect(await page.getByLabel(`${label} URL 1`, { exact: true }).getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('[data-setting="prompt"] .error').isHidden()).toBe(true);
    expect(await page.locator('#generate-error').textContent()).toMatch(/See the fields marked above/);
    expect(creates).toHaveLength(1);
    // Nothing was charged for the refused request.
    await page.waitForTimeout(300);
    expect(await page.locator('#balance').textContent()).toBe(balanceBefore);
    await page.screenshot({ path: join(ARTIFACTS, 'field-errors.png'), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('402: too few tokens is said beside the Generate button, with nothing started', async () => {
    const { page, problems } = await newPage();
    await connect(page, host.api, POOR);
    await fillForm(page, 'demo-image', { Prompt: 'a boat', Size: '512x512' });
    await expect.poll(() => page.locator('#balance').textContent()).toBe('2 tokens');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    const error = page.locator('#generate-error');
    await error.waitFor();
    expect(await error.textContent()).toMatch(/^Not enough tokens\. /);
    expect(await page.locator('#status').textContent()).toBe('Nothing generated yet.');
    expect(problems).toEqual([]);
    await page.close();
  });

  it('falls back to polling when the event stream is not available', async () => {
    const { page, problems } = await newPage();
    let streams = 0;
    await page.route('**/v1/generations/*/events', (route) => {
      streams++;
      return route.abort();
    });
    await connect(page, host.api, ALICE);
    expect(await generate(page, 'demo-text', { Prompt: 'polling' })).toBe('completed');
    expect(streams).toBeGreaterThan(0);
    expect((await page.locator('#result .text-result').textContent())!.length).toBeGreaterThan(20);
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('history', () => {
  it('lists the caller’s generations newest first, pages, and opens one to show its result again', async () => {
    // More than a page of generations, made through the API itself.
    for (let i = 0; i < 12; i++) {
      const res = await fetch(`${host.api}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: 'demo-text', settings: { prompt: `history ${i}` } }),
      });
      expect(res.status).toBe(201);
    }
    const list = (await (await fetch(`${host.api}/v1/generations?limit=100&modelId=demo-image`, { headers: { authorization: `Bearer ${ALICE}` } })).json()) as {
      data: Array<{ generationId: string; status: string }>;
    };
    const image = list.data.find((g) => g.status === 'completed')!;
    expect(image).toBeDefined();

    const { page, problems } = await newPage();
    await connect(page, host.api, ALICE);
    const entries = page.locator('#history > li');
    await expect.poll(() => entries.count()).toBe(10);
    const more = page.getByRole('button', { name: 'Show older' });
    expect(await more.isVisible()).toBe(true);
    await more.click();
    await expect.poll(() => entries.count()).toBeGreaterThan(10);
    const ids = await entries.evaluateAll((els) => els.map((el) => el.getAttribute('data-id')));
    expect(new Set(ids).size).toBe(ids.length);
    while (await more.isVisible()) {
      const n = await entries.count();
      await more.click();
      await expect.poll(() => entries.count()).toBeGreaterThan(n);
    }
    await page.locator(`#history > li[data-id="${image.generationId}"] button.entry`).click();
    const img = page.locator('#result img');
    await expect.poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(256);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('result-heading');
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('usage', () => {
  it('draws the last 30 days\u2019 spend by model as the page\u2019s own SVG, matching GET /v1/usage, and redraws after a generation', async () => {
    const auth = { authorization: `Bearer ${CAROL}` };
    const { page, problems } = await newPage();
    await connect(page, host.api, CAROL);
    await expect.poll(() => page.locator('#usage-caption').textContent()).toBe('Nothing spent in the last 30 days.');
    expect(await page.locator('#usage svg').count()).toBe(0);

    for (const modelId of ['demo-text', 'demo-text']) {
      const res = await fetch(`${host.api}/v1/generations`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId, settings: { prompt: 'usage' } }),
      });
      expect(res.status).toBe(201);
    }
    // Settled is what counts: wait until the API itself reports both.
    const usage = () => fetch(`${host.api}/v1/usage?groupBy=model`, { headers: auth }).then((r) => r.json()) as Promise<{ data: Array<{ modelId: string; tokens: number; count: number }>; total: { count: number; tokens: number } }>;
    await expect.poll(async () => (await usage()).total.count, { timeout: 20_000 }).toBe(2);
    // One more from the form: the chart redraws by itself when it ends.
    expect(await generate(page, 'demo-image', { Prompt: 'a usage chart' })).toBe('completed');
    await expect.poll(async () => (await usage()).total.count, { timeout: 20_000 }).toBe(3);
    await page.locator('#usage-refresh').click();
    const api = await usage();
    const bars = page.locator('#usage svg g.usage-bar');
    await expect.poll(() => bars.count()).toBe(api.data.length);
    expect(await bars.evaluateAll((els) => els.map((el) => [el.getAttribute('data-model'), Number(el.getAttribute('data-tokens'))]))).toEqual(
      api.data.map((r) => [r.modelId, r.tokens]),
    );
    // Bars are scaled to the largest spend: the first (most spent) is the widest.
    const widths = await page.locator('#usage svg rect').evaluateAll((els) => els.map((el) => Number(el.getAttribute('width'))));
    expect(widths[0]).toBe(Math.max(...widths));
    expect(await page.locator('#usage-caption').textContent()).toBe(`Last 30 days: ${api.total.tokens} tokens over 3 generations.`);
    expect(await page.locator('#usage svg').getAttribute('role')).toBe('img');
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('deleting from the history', () => {
  it('asks first; a dismissed question deletes nothing, a confirmed one deletes the generation and its entry', async () => {
    const made: string[] = [];
    for (const prompt of ['keep me', 'delete me']) {
      const res = await fetch(`${host.api}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${BUSY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: 'demo-text', settings: { prompt } }),
      });
      made.push(((await res.json()) as { generationId: string }).generationId);
    }
    const [kept, doomed] = made as [string, string];
    const read = async (id: string): Promise<number> => (await fetch(`${host.api}/v1/generations/${id}`, { headers: { authorization: `Bearer ${BUSY}` } })).status;

    const { page, problems } = await newPage();
    await connect(page, host.api, BUSY);
    const entry = page.locator(`#history > li[data-id="${doomed}"]`);
    await expect.poll(() => entry.count()).toBe(1);
    const questions: string[] = [];
    let answer = false;
    page.on('dialog', (d) => {
      questions.push(d.message());
      void (answer ? d.accept() : d.dismiss());
    });
    const remove = entry.getByRole('button', { name: /^Delete / });
    await remove.click();
    await expect.poll(() => questions.length).toBe(1);
    expect(questions[0]).toMatch(/^Delete .*\?/);
    expect(await entry.count()).toBe(1);
    expect(await read(doomed)).toBe(200);

    answer = true;
    await remove.click();
    await expect.poll(() => entry.count()).toBe(0);
    expect(questions).toHaveLength(2);
    expect(await read(doomed)).toBe(404);
    expect(await read(kept)).toBe(200);
    expect(await page.locator(`#history > li[data-id="${kept}"]`).count()).toBe(1);
    // After a refresh it stays gone: the service deleted it, not just the page.
    await page.locator('#history-refresh').click();
    await expect.poll(() => page.locator(`#history > li[data-id="${kept}"]`).count()).toBe(1);
    expect(await entry.count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('usable without a mouse and on a phone', () => {
  it('keeps a sensible focus order and generates from the keyboard alone', async () => {
    const { page, problems } = await newPage();
    await page.goto(`${host.api}/playground`);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to the form');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('api-key');
    await page.keyboard.type(ALICE);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-text');
    await page.getByLabel('Model', { exact: true }).focus();
    const order: string[] = [];
    for (let i = 0; i < 5; i++) {
      await page.keyboard.press('Tab');
      order.push(await page.evaluate(() => document.activeElement?.id ?? ''));
    }
    expect(order).toEqual(['setting-prompt', 'setting-length', 'setting-style', 'generate', 'tab-result']);
    await page.getByLabel('Prompt', { exact: true }).focus();
    await page.keyboard.type('typed, not clicked');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('generate');
    await page.keyboard.press('Enter');
    await page.locator('#status[data-generation][data-state="completed"]').waitFor({ timeout: 30_000 });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('fits a phone-width screen without sideways scrolling', async () => {
    const { page, problems } = await newPage(undefined, { width: 375, height: 740 });
    await connect(page, host.api, ALICE);
    expect(await generate(page, 'demo-image', { Prompt: 'a phone-sized picture', Size: '512x512' })).toBe('completed');
    await expect.poll(() => page.locator('#result img').evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(512);
    const widths = await page.evaluate(() => ({
      page: document.documentElement.scrollWidth,
      viewport: window.innerWidth,
      image: document.querySelector('#result img')!.getBoundingClientRect().right,
    }));
    expect(widths.page).toBeLessThanOrEqual(widths.viewport);
    expect(widths.image).toBeLessThanOrEqual(widths.viewport);
    await page.screenshot({ path: join(ARTIFACTS, 'phone.png'), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('accessibility', () => {
  it('an axe-core scan finds no serious or critical violations (form, field errors, results)', async () => {
    const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
    // Only here: the page's CSP rightly refuses an injected script, and axe has to be injected.
    const context = await browser.newContext({ bypassCSP: true, viewport: { width: 1100, height: 1300 } });
    const { page } = await newPage(context);
    const scan = async (state: string): Promise<void> => {
      await page.addScriptTag({ content: axeSource });
      const result = await page.evaluate(async () => {
        const r = await (window as unknown as { axe: { run(ctx: Document, o: object): Promise<{ violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: string[] }> }> }> } }).axe.run(document, {
          resultTypes: ['violations'],
        });
        return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) }));
      });
      const bad = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      expect(bad, `${state}: ${JSON.stringify(bad, null, 1)}`).toEqual([]);
    };
    await page.goto(`${host.api}/playground`);
    await scan('before connecting');
    await connect(page, host.api, ALICE);
    await fillForm(page, 'demo-image-remix', { Prompt: 'scan' });
    await page.getByLabel('Input images (PNG is decoded; other formats seed a pattern) URL 1', { exact: true }).fill('ftp://x');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.locator('[data-setting="images"] > .error').waitFor();
    await scan('field errors');
    expect(await generate(page, 'demo-3d', { Prompt: 'scan' })).toBe('completed');
    await page.locator('canvas.viewer[data-drawn="true"]').waitFor();
    await scan('3d result');
    expect(await generate(page, 'demo-always-fails', { Prompt: 'scan' })).toBe('failed');
    await scan('failed result');
    await context.close();
  });
});

describe('the other example hosts serve the same page', () => {
  it('Fastify: a text generation from the form', async () => {
    const fastify = await startHost('fastify', { USERS_FILE: data.usersFile, DATA_DIR: join(data.dir, 'fastify'), DEMO_SPEED: '0.05' });
    try {
      const { page, problems } = await newPage();
      await connect(page, fastify.api, ALICE);
      expect(await generate(page, 'demo-text', { Prompt: 'fastify' })).toBe('completed');
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await fastify.kill();
    }
  });

  it('Koa: live progress from the event stream, and a 429 beside Generate while one generation is in flight', async () => {
    const koa = await startHost('koa', { USERS_FILE: data.usersFile, DATA_DIR: join(data.dir, 'koa'), DEMO_SPEED: '4', IN_FLIGHT_PER_USER: '1' });
    try {
      const { page, problems } = await newPage();
      await connect(page, koa.api, BUSY);
      await fillForm(page, 'demo-video', { Prompt: 'slow waves', 'Frame size': '160x120', 'Duration (seconds)': '2' });
      await expect.poll(() => page.locator('#price').textContent()).toMatch(/^\d+ tokens$/);
      await page.getByRole('button', { name: 'Generate', exact: true }).click();
      // Progress as the model reports it, in the status element and the progress bar.
      await expect.poll(() => page.locator('#status').textContent(), { timeout: 20_000 }).toMatch(/^Status: processing · .+ · \d+ %$/);
      expect(Number(await page.locator('#progress').evaluate((el: HTMLProgressElement) => el.value))).toBeGreaterThan(0);
      await page.getByRole('button', { name: 'Generate', exact: true }).click();
      const error = page.locator('#generate-error');
      await error.waitFor();
      expect(await error.textContent()).toMatch(/Try again in \d+ s\.$/);
      await page.screenshot({ path: join(ARTIFACTS, 'progress-and-429.png'), fullPage: true });
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await koa.kill();
    }
  });
});
