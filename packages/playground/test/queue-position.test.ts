// The queue position in a real browser: with one runner slot busy and another generation waiting, a new generation's
// status line says where it waits, and the number goes down as the line moves, until it runs.
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, tempData, type RunningHost, type TempData } from '../../../examples/test/helpers.js';
import { launchChromium } from './browser.js';

const KEY = 'queue-playground-key-0123456789ab';

let browser: Browser;
let data: TempData;
let host: RunningHost;

beforeAll(async () => {
  data = tempData([{ id: 'waiter', apiKey: KEY, balance: 100_000 }]);
  // One slot, demo models at a third of their pace: each text run takes a few seconds, so the line is visible.
  host = await startHost('express', { USERS_FILE: data.usersFile, DATA_DIR: join(data.dir, 'express'), DEMO_SPEED: '3', CONCURRENCY: '1' });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await host?.stop();
  data?.cleanup();
});

describe('queue position in the playground', () => {
  it('shows "#n in the queue" for a waiting generation, going down until it runs', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 1300 } });
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(`${host.api}/playground`);
    await page.getByLabel('API key', { exact: true }).fill(KEY);
    await page.getByRole('button', { name: 'Connect' }).click();
    await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-text');
    await page.getByLabel('Prompt', { exact: true }).fill('the one that waits');
    // Every position the status line showed, in order (recorded in the page, so none is missed).
    await page.evaluate(() => {
      const shown: number[] = [];
      (window as unknown as { shown: number[] }).shown = shown;
      const status = document.getElementById('status')!;
      new MutationObserver(() => {
        const at = status.querySelector('.queue-position')?.getAttribute('data-position');
        if (at && Number(at) !== shown.at(-1)) shown.push(Number(at));
      }).observe(status, { childList: true, subtree: true, characterData: true });
    });
    // Two generations ahead of the page's: one running, one waiting.
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${host.api}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: 'demo-text', settings: { prompt: `ahead ${i}`, length: 'long' } }),
      });
      expect(res.status).toBe(201);
    }
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.waitForFunction(() => document.getElementById('status')!.dataset.state === 'processing', undefined, { timeout: 60_000 });
    const shown = await page.evaluate(() => (window as unknown as { shown: number[] }).shown);
    expect(shown.length, `positions shown: ${shown.join(', ')}`).toBeGreaterThanOrEqual(1);
    expect(shown[0]).toBeGreaterThanOrEqual(2);
    expect([...shown].sort((a, b) => b - a)).toEqual(shown);
    expect(await page.locator('#status .queue-position').count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });
});
