// Issue 38 in a real browser (Debian's Chromium through playwright-core) against the Express example host: compact
// history cards with the prompt and a thumbnail, the Code tab (curl and @genservice/client for the current form, kept
// up to date, and both really work), a usage chart whose labels are whole and inside it, model names that fit their
// select, the reason a generation failed, and an axe-core scan of these states.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, tempData, type RunningHost, type TempData } from '../../../examples/test/helpers.js';
import { ARTIFACTS, launchChromium } from './browser.js';

const KEY = 'cards-playground-key-0123456789';
const root = fileURLToPath(new URL('../../../', import.meta.url));

let browser: Browser;
let data: TempData;
let host: RunningHost;

beforeAll(async () => {
  data = tempData([{ id: 'dana', apiKey: KEY, balance: 100_000 }]);
  host = await startHost('express', { USERS_FILE: data.usersFile, DATA_DIR: join(data.dir, 'express'), DEMO_SPEED: '0.05' });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await host?.stop();
  data?.cleanup();
});

async function newPage(context?: BrowserContext, viewport = { width: 1100, height: 1300 }): Promise<{ page: Page; problems: string[] }> {
  const page = await (context ?? browser).newPage({ viewport });
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  return { page, problems };
}

async function connect(page: Page): Promise<void> {
  await page.goto(`${host.api}/playground`);
  await page.getByLabel('API key', { exact: true }).fill(KEY);
  await page.getByRole('button', { name: 'Connect' }).click();
  await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
}

async function fillForm(page: Page, modelId: string, fill: Record<string, string>): Promise<void> {
  await page.getByLabel('Model', { exact: true }).selectOption(modelId);
  for (const [label, value] of Object.entries(fill)) {
    const control = page.getByLabel(label, { exact: true });
    if ((await control.evaluate((el) => el.tagName)) === 'SELECT') await control.selectOption(value);
    else await control.fill(value);
  }
}

async function generate(page: Page, modelId: string, fill: Record<string, string>): Promise<{ state: string; id: string }> {
  await fillForm(page, modelId, fill);
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
  return { state: (await status.getAttribute('data-state'))!, id: (await status.getAttribute('data-generation'))! };
}

const api = (path: string, init: RequestInit = {}): Promise<Response> =>
  fetch(`${host.api}${path}`, { ...init, headers: { authorization: `Bearer ${KEY}`, ...init.headers } });

describe('history cards', () => {
  it('show the prompt and a thumbnail of an image result, a line of a text result, and stay compact', async () => {
    const { page, problems } = await newPage();
    await connect(page);
    const image = await generate(page, 'demo-image', { Prompt: 'a lighthouse at dusk', Size: '256x256' });
    expect(image.state).toBe('completed');
    const text = await generate(page, 'demo-text', { Prompt: 'a walk in the rain' });
    expect(text.state).toBe('completed');

    // The image's card: its prompt, the model, and a thumbnail that is the result itself, loaded.
    const card = page.locator(`#history > li[data-id="${image.id}"]`);
    await expect.poll(() => card.count()).toBe(1);
    expect(await card.locator('.entry-title').textContent()).toBe('a lighthouse at dusk');
    expect(await card.locator('.entry-model').textContent()).toMatch(/^Demo image/);
    const thumb = card.locator('.thumb img');
    await expect.poll(() => thumb.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(256);
    const result = (await (await api(`/v1/generations/${image.id}`)).json()) as { result: string };
    expect(new URL((await thumb.getAttribute('src'))!).pathname).toBe(new URL(result.result).pathname);
    // It came from the API: the prompt is a label of the generation (metadata), so any browser shows it.
    const details = (await (await api(`/v1/generations/${image.id}/details`)).json()) as { metadata?: Record<string, string> };
    expect(details.metadata).toEqual({ prompt: 'a lighthouse at dusk' });

    // The text's card: its prompt and the start of the text.
    const textCard = page.locator(`#history > li[data-id="${text.id}"]`);
    await expect.poll(() => textCard.count()).toBe(1);
    expect(await textCard.locator('.entry-title').textContent()).toBe('a walk in the rain');
    const done = (await (await api(`/v1/generations/${text.id}`)).json()) as { result: string };
    const line = (await textCard.locator('.entry-line').textContent())!;
    expect(line.length).toBeGreaterThan(10);
    expect(done.result.replace(/\s+/g, ' ').startsWith(line.replace(/…$/, ''))).toBe(true);

    // Compact: a card is one thumbnail high (48 px and its padding), whatever its text.
    const heights = await page.locator('#history > li').evaluateAll((els) => els.map((el) => el.getBoundingClientRect().height));
    expect(Math.max(...heights)).toBeLessThanOrEqual(72);
    // The card is a button that opens the generation: its accessible name carries the prompt.
    await card.getByRole('button', { name: /a lighthouse at dusk/ }).click();
    await expect.poll(() => page.locator('#result img').evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(256);
    await page.locator('#history').screenshot({ path: join(ARTIFACTS, 'history-cards.png') });
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('the Code tab', () => {
  it('shows the curl command and the @genservice/client call of the current form, updated as it changes; both run', async () => {
    const { page, problems } = await newPage();
    await connect(page);
    await page.getByRole('tab', { name: 'Code' }).click();
    await fillForm(page, 'demo-image', { Prompt: "the fox's den at dawn", Size: '512x512' });
    const curl = page.locator('#code-curl');
    const client = page.locator('#code-ts');
    await expect.poll(() => curl.textContent()).toContain('"size":"512x512"');
    const command = (await curl.textContent())!;
    expect(command).toContain(`'${host.api}/v1/generations'`);
    expect(command).toContain('"modelId":"demo-image"');
    // A single quote in the prompt is closed, escaped and reopened: the shell sees the prompt as typed.
    expect(command).toContain(`"prompt":"the fox'\\''s den at dawn"`);
    expect(command).toContain('$GENSERVICE_API_KEY');
    expect(command).not.toContain(KEY);
    const code = (await client.textContent())!;
    expect(code).toContain("modelId: 'demo-image'");
    expect(code).toContain("prompt: 'the fox\\'s den at dawn'");
    expect(code).toContain("size: '512x512'");
    expect(code).not.toContain(KEY);

    // Another setting and another model: the code follows the form.
    await page.getByLabel('Size', { exact: true }).selectOption('256x256');
    await expect.poll(() => curl.textContent()).toContain('"size":"256x256"');
    expect(await client.textContent()).toContain("size: '256x256'");
    await fillForm(page, 'demo-text', { Prompt: 'tea', Length: 'long' });
    await expect.poll(() => curl.textContent()).toContain('"modelId":"demo-text"');
    expect(await curl.textContent()).toContain('"settings":{"prompt":"tea","length":"long"}');
    expect(await client.textContent()).toContain("length: 'long'");
    await page.screenshot({ path: join(ARTIFACTS, 'code-tab.png'), fullPage: true });

    // The curl command as shown, in a shell with the key in GENSERVICE_API_KEY: the service answers 201.
    const shown = (await curl.textContent())!;
    const { stdout } = await promisify(execFile)('sh', ['-c', shown], { env: { ...process.env, GENSERVICE_API_KEY: KEY } });
    const created = JSON.parse(stdout) as { generationId: string };
    expect(created.generationId).toMatch(/\S/);
    const made = (await (await api(`/v1/generations/${created.generationId}/details`)).json()) as { modelId: string };
    expect(made.modelId).toBe('demo-text');

    // The TypeScript as shown is a program that compiles (strict, against @genservice/client's own types).
    const dir = join(root, 'packages/playground/.generated-code');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    try {
      writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
      writeFileSync(join(dir, 'run.ts'), (await client.textContent())!);
      const program = ts.createProgram([join(dir, 'run.ts')], {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.ESNext,
        moduleResolution: ts.ModuleResolutionKind.Bundler,
        paths: { '@genservice/client': [join(root, 'packages/client/src/index.ts')] },
        lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
        skipLibCheck: true,
      });
      const errors = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
      expect(errors).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    // Generate shows the result tab again.
    await page.getByRole('tab', { name: 'Code' }).click();
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    await expect.poll(() => page.getByRole('tab', { name: 'Result' }).getAttribute('aria-selected')).toBe('true');
    expect(await page.locator('#panel-code').isHidden()).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('is a tab list the keyboard works: arrows move between Result and Code, only the chosen tab is in the Tab order', async () => {
    const { page, problems } = await newPage();
    await connect(page);
    await page.getByLabel('Model', { exact: true }).selectOption('demo-text');
    const result = page.getByRole('tab', { name: 'Result' });
    await result.focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('tab-code');
    expect(await page.getByRole('tab', { name: 'Code' }).getAttribute('aria-selected')).toBe('true');
    expect(await page.locator('#panel-code').isVisible()).toBe(true);
    expect(await page.locator('#panel-result').isHidden()).toBe(true);
    expect(await result.getAttribute('tabindex')).toBe('-1');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('copy-curl');
    await page.keyboard.press('Shift+Tab');
    await page.keyboard.press('Home');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('tab-result');
    expect(await page.locator('#panel-result').isVisible()).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('the usage chart', () => {
  it('shows each model’s whole name, inside the chart, at the page’s text size, and redraws at a new width', async () => {
    for (const [modelId, prompt] of [
      ['demo-always-fails', 'usage'],
      ['demo-text', 'usage'],
    ] as const) {
      const res = await api('/v1/generations', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ modelId, settings: { prompt } }) });
      expect(res.status).toBe(201);
    }
    const usage = async () => (await (await api('/v1/usage?groupBy=model')).json()) as { data: Array<{ modelId: string; tokens: number }> };
    await expect.poll(async () => (await usage()).data.some((r) => r.modelId === 'demo-always-fails'), { timeout: 20_000 }).toBe(true);
    const models = (await (await api('/v1/models')).json()) as { models: Array<{ modelId: string; title: string }> };
    const titles = new Map(models.models.map((m) => [m.modelId, m.title]));

    for (const width of [1100, 375]) {
      const { page, problems } = await newPage(undefined, { width, height: 1300 });
      await connect(page);
      await page.locator('#usage-refresh').click();
      const bars = page.locator('#usage svg g.usage-bar');
      await expect.poll(async () => (await usage()).data.length > 0 && (await bars.count()) === (await usage()).data.length).toBe(true);
      // Read in one synchronous step from the chart on the page now: a handle resolved first could be a chart that a
      // redraw (the load on connect landing after the refresh, or a width change) has just taken off the page.
      const drawn = await page.evaluate(() => {
        const svg = document.querySelector('#usage svg')!;
        const box = svg.getBoundingClientRect();
        return Array.from(svg.querySelectorAll('g.usage-bar')).map((g) => ({
          model: g.getAttribute('data-model'),
          label: Array.from(g.querySelectorAll('text.usage-label')).map((t) => t.textContent).join(' '),
          inside: Array.from(g.querySelectorAll('text')).every((t) => {
            const r = t.getBoundingClientRect();
            return r.left >= box.left - 0.5 && r.right <= box.right + 0.5 && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5;
          }),
          fontPx: Math.min(...Array.from(g.querySelectorAll('text')).map((t) => t.getBoundingClientRect().height)),
        }));
      });
      for (const bar of drawn) {
        expect(bar.label, `${width}px`).toBe(titles.get(bar.model!));
        expect(bar.inside, `${width}px ${bar.model}`).toBe(true);
        expect(bar.fontPx, `${width}px ${bar.model}`).toBeGreaterThanOrEqual(13);
      }
      // The longest demo title takes more than one line on a phone, and still is whole.
      if (width === 375) expect(await page.locator('#usage g[data-model="demo-always-fails"] text.usage-label').count()).toBeGreaterThan(1);
      await page.locator('#usage').screenshot({ path: join(ARTIFACTS, `usage-${width}.png`) });
      // A new width: the chart is drawn again at it, the text keeping its size.
      if (width === 1100) {
        await page.setViewportSize({ width: 600, height: 1300 });
        await expect.poll(() => page.locator('#usage svg').evaluate((svg) => Math.abs(svg.getBoundingClientRect().width - Number(svg.getAttribute('width'))) < 1 && Number(svg.getAttribute('width')) < 600)).toBe(true);
      }
      expect(problems).toEqual([]);
      await page.close();
    }
  });
});

describe('the model select', () => {
  it('shows every model’s name within the select at desktop and phone widths; the hint gives the whole title', async () => {
    for (const width of [1100, 375]) {
      const { page, problems } = await newPage(undefined, { width, height: 1000 });
      await connect(page);
      const select = page.getByLabel('Model', { exact: true });
      const fit = await select.evaluate((el: HTMLSelectElement) => {
        const style = getComputedStyle(el);
        const ctx = document.createElement('canvas').getContext('2d')!;
        ctx.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
        const room = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;
        return Array.from(el.options).map((o) => ({ value: o.value, text: o.text, title: o.title, fits: ctx.measureText(o.text).width <= room }));
      });
      expect(fit.length).toBeGreaterThanOrEqual(7);
      for (const o of fit) {
        expect(o.fits, `${width}px: ${o.text}`).toBe(true);
        expect(o.title.startsWith(o.text.replace(/…$/, '')), `${o.text} is the start of ${o.title}`).toBe(true);
      }
      // Grouped by result type.
      expect(await select.locator('optgroup').evaluateAll((els) => els.map((el) => el.getAttribute('label')))).toEqual(expect.arrayContaining(['Image', 'Video', 'Text', 'Audio', '3D']));
      await select.selectOption('demo-always-fails');
      const title = fit.find((o) => o.value === 'demo-always-fails')!.title;
      expect(await page.locator('#model-info').textContent()).toContain(title);
      await page.locator('#generate-panel').screenshot({ path: join(ARTIFACTS, `model-select-${width}.png`) });
      expect(problems).toEqual([]);
      await page.close();
    }
  });
});

describe('a failed generation', () => {
  it('shows its reason, the code and the public message of its details, not a generic sentence', async () => {
    const { page, problems } = await newPage();
    await connect(page);
    const failed = await generate(page, 'demo-always-fails', { Prompt: 'anything' });
    expect(failed.state).toBe('failed');
    const details = (await (await api(`/v1/generations/${failed.id}/details`)).json()) as { error: { code: string; message: string } };
    expect(details.error.message).toMatch(/on purpose/);
    expect(await page.locator('#result .failure').getAttribute('data-code')).toBe(details.error.code);
    expect(await page.locator('#result .failure-message').textContent()).toBe(details.error.message);
    expect(await page.locator('#result .failure-code').textContent()).toBe('provider_error');
    expect(await page.locator('#result').textContent()).not.toContain('The model failed to generate a result.');
    // Its history card says it too.
    await expect.poll(() => page.locator(`#history > li[data-id="${failed.id}"] .entry-line.failed`).textContent()).toMatch(/on purpose/);
    // Opened again from the history, without the live stream: the same reason.
    await page.reload();
    await expect.poll(() => page.getByLabel('Model', { exact: true }).isEnabled()).toBe(true);
    await page.locator(`#history > li[data-id="${failed.id}"] button.entry`).click();
    await expect.poll(() => page.locator('#result .failure-message').textContent()).toBe(details.error.message);
    await page.locator('#result').screenshot({ path: join(ARTIFACTS, 'failure-reason.png') });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('reads the reason from the details when the item it has carries none', async () => {
    const { page, problems } = await newPage();
    // The stream and the details poll answer without `error` here: the page asks GET .../details for it.
    await page.route('**/v1/generations/*/events', (route) => route.abort());
    const detailsAsked: string[] = [];
    const poll = (url: URL): boolean => /\/v1\/generations\/[^/]+$/.test(url.pathname) && url.searchParams.get('include') === 'details';
    await page.route(poll, async (route) => {
      const res = await route.fetch();
      const body = (await res.json()) as Record<string, unknown>;
      delete body.error;
      await route.fulfill({ response: res, json: body });
    });
    page.on('request', (r) => {
      if (/\/v1\/generations\/[^/]+\/details$/.test(new URL(r.url()).pathname)) detailsAsked.push(r.url());
    });
    await connect(page);
    const failed = await generate(page, 'demo-always-fails', { Prompt: 'no error in the poll' });
    expect(failed.state).toBe('failed');
    await expect.poll(() => page.locator('#result .failure-message').textContent()).toMatch(/on purpose/);
    expect(detailsAsked.some((u) => u.includes(failed.id))).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe('accessibility of these states', () => {
  it('an axe-core scan finds no serious or critical violations: history cards, the Code tab, a failure reason, the usage chart', async () => {
    const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
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
    await connect(page);
    expect((await generate(page, 'demo-image', { Prompt: 'an accessible picture' })).state).toBe('completed');
    await page.locator('#history .thumb img').first().waitFor();
    await page.locator('#usage svg').waitFor();
    await scan('history cards and usage chart');
    await page.getByRole('tab', { name: 'Code' }).click();
    await page.locator('#code-curl').waitFor();
    await scan('code tab');
    expect((await generate(page, 'demo-always-fails', { Prompt: 'scan' })).state).toBe('failed');
    await page.locator('#result .failure').waitFor();
    await scan('failure reason');
    await context.close();
  });
});
