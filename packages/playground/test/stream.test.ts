// Partial output in a real browser (Debian's Chromium through playwright-core): the demo text model's words appear
// while it runs and the demo image model's preview is shown before the final image. The host runs the demo models
// slower than their real pace (DEMO_SPEED 3: the text takes 3 s) so that a run streams for a while even when the
// browser is slow to open its event stream on a busy machine.
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, tempData, type RunningHost, type TempData } from '../../../examples/test/helpers.js';
import { launchChromium } from './browser.js';

const KEY = 'stream-playground-key-0123456789';

let browser: Browser;
let data: TempData;
let host: RunningHost;

beforeAll(async () => {
  data = tempData([{ id: 'streamer', apiKey: KEY, balance: 100_000 }]);
  host = await startHost('express', { USERS_FILE: data.usersFile, DATA_DIR: join(data.dir, 'express'), DEMO_SPEED: '3' });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await host?.stop();
  data?.cleanup();
});

async function connect(page: Page): Promise<void> {
  await page.goto(`${host.api}/playground`);
  await page.getByLabel('API key', { exact: true }).fill(KEY);
  await page.getByRole('button', { name: 'Connect' }).click();
  await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
}

/**
 * Records, from inside the page, every state of the result area while the generation runs: the streamed text's length
 * and whether a preview or the final image is there, in the order they happened.
 */
async function record(page: Page): Promise<void> {
  await page.evaluate(() => {
    const seen: Array<{ partialText: number | null; preview: boolean; finalImage: boolean; finalText: boolean }> = [];
    (window as unknown as { seen: typeof seen }).seen = seen;
    const result = document.getElementById('result')!;
    new MutationObserver(() => {
      const partial = result.querySelector('[data-partial] .text-result');
      seen.push({
        partialText: partial ? (partial.textContent ?? '').length : null,
        preview: result.querySelector('[data-partial] img.preview') !== null,
        finalImage: result.querySelector('img[alt^="Generated image"]') !== null,
        finalText: result.querySelector('[aria-label="Generated text"]') !== null,
      });
    }).observe(result, { childList: true, subtree: true, characterData: true });
  });
}

async function generateAndWait(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  await page.waitForFunction(() => document.getElementById('status')!.dataset.state === 'completed', undefined, { timeout: 30_000 });
}

type Seen = Array<{ partialText: number | null; preview: boolean; finalImage: boolean; finalText: boolean }>;
const seenOf = (page: Page): Promise<Seen> => page.evaluate(() => (window as unknown as { seen: Seen }).seen);

describe('partial output in the playground', () => {
  it('shows the text growing while the demo text model runs, then the result', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 1300 } });
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await connect(page);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-text');
    await page.getByLabel('Prompt', { exact: true }).fill('a lighthouse keeper who befriends a whale');
    await page.getByLabel('Length', { exact: true }).selectOption('long');
    await record(page);
    await generateAndWait(page);
    const seen = await seenOf(page);
    const lengths = seen.map((s) => s.partialText).filter((n): n is number => n !== null && n > 0);
    // Several different, growing lengths were on screen before the result.
    expect(new Set(lengths).size).toBeGreaterThanOrEqual(2);
    expect([...lengths].sort((a, b) => a - b)).toEqual(lengths);
    const firstFinal = seen.findIndex((s) => s.finalText);
    const firstPartial = seen.findIndex((s) => (s.partialText ?? 0) > 0);
    expect(firstPartial).toBeGreaterThanOrEqual(0);
    expect(firstPartial).toBeLessThan(firstFinal);
    const final = (await page.getByRole('region', { name: 'Generated text' }).textContent()) ?? '';
    expect(final.length).toBeGreaterThanOrEqual(Math.max(...lengths));
    expect(problems).toEqual([]);
    await page.close();
  });

  it('shows the demo image model\u2019s preview (served, a PNG) before the final image', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 1300 } });
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    const images: Array<{ url: string; status: number; type: string | undefined }> = [];
    page.on('response', (r) => {
      if (r.url().includes('/v1/files/')) images.push({ url: r.url(), status: r.status(), type: r.headers()['content-type'] });
    });
    await connect(page);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-image');
    await page.getByLabel('Prompt', { exact: true }).fill('a red lighthouse at dusk');
    await record(page);
    await generateAndWait(page);
    const seen = await seenOf(page);
    const firstPreview = seen.findIndex((s) => s.preview);
    const firstFinal = seen.findIndex((s) => s.finalImage);
    expect(firstPreview).toBeGreaterThanOrEqual(0);
    expect(firstFinal).toBeGreaterThan(firstPreview);
    // The browser loaded two files: the preview, then the image.
    await expect.poll(() => images.length).toBeGreaterThanOrEqual(2);
    expect(images.every((i) => i.status === 200 && i.type === 'image/png')).toBe(true);
    expect(new Set(images.map((i) => i.url)).size).toBeGreaterThanOrEqual(2);
    expect(problems).toEqual([]);
    await page.close();
  });
});
