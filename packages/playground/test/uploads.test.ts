// The playground's file picker and "Use as input" in a real browser (Debian's Chromium through playwright-core) against
// the Express example host with ALLOW_PRIVATE_MEDIA off: demo-image-remix runs locally on an uploaded file and on
// its own result, and a file the service does not take is named beside the setting.
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, tempData, type RunningHost, type TempData } from '../../../examples/test/helpers.js';
import { ARTIFACTS, launchChromium } from './browser.js';

const ALICE = 'alice-uploads-key-0123456789abcd';
const IMAGES = 'Input images (PNG is decoded; other formats seed a pattern)';

let browser: Browser;
let data: TempData;
let host: RunningHost;

beforeAll(async () => {
  data = tempData([{ id: 'alice', apiKey: ALICE, balance: 100_000 }]);
  host = await startHost('express', { USERS_FILE: data.usersFile, DATA_DIR: join(data.dir, 'express'), DEMO_SPEED: '0.05' });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await host?.stop();
  data?.cleanup();
});

/** A PNG the demo draws, read through the API (a real picture to pick as a file). */
async function png(): Promise<Buffer> {
  const auth = { authorization: `Bearer ${ALICE}` };
  const created = await fetch(`${host.api}/v1/generations`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ modelId: 'demo-image', settings: { prompt: 'a lighthouse at dusk', size: '256x256' } }),
  });
  const { generationId } = (await created.json()) as { generationId: string };
  await expect
    .poll(async () => ((await (await fetch(`${host.api}/v1/generations/${generationId}`, { headers: auth })).json()) as { status: string }).status, { timeout: 30_000 })
    .toBe('completed');
  const { result } = (await (await fetch(`${host.api}/v1/generations/${generationId}`, { headers: auth })).json()) as { result: string };
  return Buffer.from(await (await fetch(result)).arrayBuffer());
}

async function generateAndWait(page: Page): Promise<string> {
  await expect.poll(() => page.locator('#price').textContent()).toMatch(/^\d+ tokens?$/);
  const status = page.locator('#status');
  const previous = await status.getAttribute('data-generation');
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  await page.waitForFunction(
    (prev) => {
      const el = document.getElementById('status')!;
      return el.dataset.generation !== undefined && el.dataset.generation !== prev && (el.dataset.state === 'completed' || el.dataset.state === 'failed');
    },
    previous ?? undefined,
    { timeout: 30_000 },
  );
  return (await status.getAttribute('data-state'))!;
}

describe('the playground: uploads as media inputs', () => {
  it('picks a file, uploads it into the image setting, runs demo-image-remix to completion, then uses its result as the next input', async () => {
    const picture = await png();
    const page = await browser.newPage({ viewport: { width: 1100, height: 1300 } });
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
    });
    await page.goto(`${host.api}/playground`);
    await page.getByLabel('API key', { exact: true }).fill(ALICE);
    await page.getByRole('button', { name: 'Connect' }).click();
    await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-image-remix');
    await page.getByLabel('Prompt', { exact: true }).fill('make it posterized');

    // A file the service does not take: said beside the setting, nothing filled in.
    await page.getByLabel(`Upload a file to ${IMAGES}`, { exact: true }).setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello') });
    const error = page.locator('[data-setting="images"] p.error');
    await expect.poll(() => error.textContent()).toMatch(/^notes\.txt was not uploaded: An upload must be one of: /);
    expect(await page.getByLabel(`${IMAGES} URL 1`, { exact: true }).inputValue()).toBe('');

    // The picture: uploaded, its URL in the first row, then a generation on it that completes.
    await page.getByLabel(`Upload a file to ${IMAGES}`, { exact: true }).setInputFiles({ name: 'lighthouse.png', mimeType: 'image/png', buffer: picture });
    await expect.poll(() => page.getByLabel(`${IMAGES} URL 1`, { exact: true }).inputValue()).toMatch(new RegExp(`^${host.api}/v1/files/[^?]+\\?exp=\\d+&sig=[^&]+&owner=`));
    expect(await page.locator('[data-setting="images"] .upload-status').textContent()).toMatch(/^Uploaded lighthouse\.png; its link works until /);
    expect(await generateAndWait(page)).toBe('completed');
    const img = page.locator('#result img');
    await expect.poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(256);
    await page.locator('#result').screenshot({ path: join(ARTIFACTS, 'remix-upload.png') });

    // "Use as input": the result goes into the next empty row, and the remix runs on both.
    const result = await img.getAttribute('src');
    await page.getByRole('button', { name: 'Use as input: this image' }).click();
    expect(await page.getByLabel(`${IMAGES} URL 2`, { exact: true }).inputValue()).toBe(result);
    expect(await generateAndWait(page)).toBe('completed');
    await expect.poll(() => page.locator('#result img').evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(256);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('switches to a model that takes images when the shown one does not, and fills it', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 1300 } });
    await page.goto(`${host.api}/playground`);
    await page.getByLabel('API key', { exact: true }).fill(ALICE);
    await page.getByRole('button', { name: 'Connect' }).click();
    await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-image');
    await page.getByLabel('Prompt', { exact: true }).fill('a red fox');
    expect(await generateAndWait(page)).toBe('completed');
    const result = await page.locator('#result img').getAttribute('src');
    await page.getByRole('button', { name: 'Use as input: this image' }).click();
    expect(await page.getByLabel('Model', { exact: true }).inputValue()).toBe('demo-image-remix');
    expect(await page.getByLabel(`${IMAGES} URL 1`, { exact: true }).inputValue()).toBe(result);
    await page.close();
  });
});
