// The form the page builds from settings descriptors it has never seen: every field type (text, select, required
// select, media lists, a host-registered type that falls back to a text input), the page's own required check, a
// 400 detail on a host-registered field, and the settings object it sends. A service in this process, served by
// plain node:http through @genservice/core/adapter, in Chromium.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { bodyLimitsOf, isApiPath, readRequestBody, writeNodeResponse } from '@genservice/core/adapter';
import { launchChromium } from './browser.js';

const KEY = 'form-test-key-0123456789abcdef';
const seen: Array<Record<string, unknown>> = [];

const provider = {
  models: [
    {
      modelId: 'every-field',
      title: 'Every field type',
      resultType: 'text' as const,
      estimatedGenerationTime: 1,
      price: 2,
      settings: [
        { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
        { name: 'mode', title: 'Mode', fieldType: 'select', options: ['fast', 'careful'], required: true },
        { name: 'tone', title: 'Tone', fieldType: 'select', options: ['plain', 'warm'] },
        { name: 'voice', title: 'Voice sample', fieldType: 'audio', required: true },
        { name: 'clips', title: 'Clips', fieldType: 'video' },
        { name: 'seed', title: 'Seed (digits)', fieldType: 'seed' },
      ],
    },
  ],
  generate: async (input: { settings: Record<string, unknown> }) => {
    seen.push(input.settings);
    return { text: `settings: ${JSON.stringify(input.settings)}` };
  },
};

let service: GenerationService;
let server: Server;
let base: string;
let browser: Browser;

beforeAll(async () => {
  service = createGenerationService({
    providers: [provider],
    playground: true,
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: KEY, userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 100 } }),
    // A field type the page knows nothing about: digits only.
    fieldTypes: { seed: () => z.string().regex(/^\d+$/, 'must be digits') },
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
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
  await service?.stop();
});

describe('the form built from settings descriptors', () => {
  it('renders each field type as its control, checks required ones, and sends what was filled in', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const creates: unknown[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/v1/generations')) creates.push(r.postDataJSON());
    });
    await page.goto(`${base}/playground/`);
    await page.getByLabel('API key', { exact: true }).fill(KEY);
    await page.getByRole('button', { name: 'Connect' }).click();
    await expect.poll(() => page.getByLabel('Model', { exact: true }).inputValue()).toBe('every-field');

    const tag = (label: string) => page.getByLabel(label, { exact: true }).evaluate((el) => `${el.tagName}${el instanceof HTMLInputElement ? `:${el.type}` : ''}`);
    expect(await tag('Prompt')).toBe('TEXTAREA');
    expect(await tag('Mode')).toBe('SELECT');
    expect(await page.getByLabel('Mode', { exact: true }).locator('option').allTextContents()).toEqual(['Choose…', 'fast', 'careful']);
    expect(await page.getByLabel('Tone', { exact: true }).locator('option').allTextContents()).toEqual(['Default', 'plain', 'warm']);
    expect(await tag('Voice sample URL 1')).toBe('INPUT:url');
    expect(await tag('Clips URL 1')).toBe('INPUT:url');
    expect(await tag('Seed (digits)')).toBe('INPUT:text'); // an unknown field type: a text input
    // Required ones are marked for everyone: `required` on the control (or aria-required on the URL inputs).
    expect(await page.getByLabel('Prompt', { exact: true }).getAttribute('required')).not.toBeNull();
    expect(await page.getByLabel('Voice sample URL 1', { exact: true }).getAttribute('aria-required')).toBe('true');
    expect(await page.getByLabel('Tone', { exact: true }).getAttribute('required')).toBeNull();

    // Nothing filled in: the page marks the three required ones and sends nothing.
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.locator('[data-setting="prompt"] .error').waitFor();
    expect(await page.locator('.error:not([hidden])').evaluateAll((els) => els.map((e) => e.id))).toEqual([
      'setting-prompt-error',
      'setting-mode-error',
      'setting-voice-error',
      'generate-error',
    ]);
    expect(creates).toEqual([]);

    // The API's own rule on the host's field type comes back on that field.
    await page.getByLabel('Prompt', { exact: true }).fill('hello');
    await page.getByLabel('Mode', { exact: true }).selectOption('careful');
    await page.getByLabel('Voice sample URL 1', { exact: true }).fill('https://media.example.com/v.wav');
    await page.getByLabel('Seed (digits)', { exact: true }).fill('12a');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    const seedError = page.locator('[data-setting="seed"] .error');
    await seedError.waitFor();
    expect(await seedError.textContent()).toMatch(/digits/);
    expect(await page.getByLabel('Seed (digits)', { exact: true }).getAttribute('aria-invalid')).toBe('true');

    // Fixed: sent are exactly the settings filled in (empty optional ones left to the model's defaults).
    await page.getByLabel('Seed (digits)', { exact: true }).fill('42');
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await page.locator('#status[data-generation][data-state="completed"]').waitFor({ timeout: 15_000 });
    const settings = { prompt: 'hello', mode: 'careful', voice: ['https://media.example.com/v.wav'], seed: '42' };
    expect((creates.at(-1) as { settings: unknown }).settings).toEqual(settings);
    expect(seen.at(-1)).toEqual(settings);
    expect(await page.locator('#result .text-result').textContent()).toBe(`settings: ${JSON.stringify(settings)}`);
    await expect.poll(() => page.locator('#price').textContent()).toBe('2 tokens');
    expect(errors).toEqual([]);
    await page.close();
  });
});
