import { launchChromium } from './browser.ts';
const browser = await launchChromium();
const page = await browser.newPage({ viewport: { width: 1100, height: 1400 } });
page.on('console', (m) => console.log('console:', m.type(), m.text()));
page.on('pageerror', (e) => console.log('pageerror:', e.message));
await page.goto('http://127.0.0.1:3311/api/playground');
await page.getByLabel('API key', { exact: true }).fill('alice-key-0123456789abcdef');
await page.getByRole('button', { name: 'Connect' }).click();
for (const [model, fill] of [['demo-3d', 'a red thing'], ['demo-image', 'a cat']] as const) {
  await page.getByLabel('Model', { exact: true }).selectOption(model);
  await page.getByLabel('Prompt', { exact: true }).fill(fill);
  await page.waitForTimeout(500);
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.locator('#status[data-state="completed"], #status[data-state="failed"]').waitFor({ timeout: 20000 });
  await page.waitForTimeout(1500);
  await page.screenshot({ path: `/tmp/pg/${model}.png`, fullPage: true });
  console.log(model, await page.locator('#status').textContent(), await page.locator('#result').innerText());
}
await browser.close();
