import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, type ModelDefinition } from '@genservice/core';

const bin = fileURLToPath(new URL('../node_modules/.bin/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gs-openapi-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const models: ModelDefinition[] = [
  {
    modelId: 'img',
    title: 'Image',
    resultType: 'image',
    estimatedGenerationTime: 1,
    settings: [
      { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
      { name: 'size', title: 'Size', fieldType: 'select', options: ['256', '512'] },
      { name: 'images', title: 'Inputs', fieldType: 'image', maxItems: 4 },
    ],
    price: 3,
  },
  { modelId: 'txt', title: 'Text', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 },
];

async function servedDocument(): Promise<string> {
  const service = createGenerationService({
    providers: [{ models, generate: async () => ({ text: 'x' }) }],
    apiKeys: new MemoryApiKeyStore(),
    publicUrl: 'https://api.genservice.test/gen',
  });
  const res = await service.handle({ method: 'GET', path: '/v1/openapi.json', headers: {} });
  const file = join(dir, 'openapi.json');
  writeFileSync(file, String(res.body));
  return file;
}

/** Offline and quiet: no telemetry, no update checks (CI has no internet). */
const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_UPDATE_NOTIFIER: '1', CI: 'true' };

describe('the served OpenAPI document, linted', () => {
  it('passes @redocly/cli lint (recommended) with no error and no warning', { timeout: 120_000 }, async () => {
    const file = await servedDocument();
    const run = spawnSync(join(bin, 'redocly'), ['lint', file, '--extends=recommended', '--format=json'], { env, encoding: 'utf8', timeout: 110_000 });
    const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{'))) as { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string }> };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });

  it('passes @stoplight/spectral-cli (spectral:oas) with no error and no warning', { timeout: 120_000 }, async () => {
    const file = await servedDocument();
    const ruleset = join(dir, '.spectral.yaml');
    writeFileSync(ruleset, 'extends: ["spectral:oas"]\n');
    const run = spawnSync(join(bin, 'spectral'), ['lint', file, '--ruleset', ruleset, '-f', 'json', '--fail-severity', 'hint'], { env, encoding: 'utf8', timeout: 110_000 });
    const start = run.stdout.indexOf('[');
    const results = JSON.parse(run.stdout.slice(start, run.stdout.lastIndexOf(']') + 1)) as Array<{ code: string; message: string; severity: number }>;
    expect(results.map((r) => `${r.code}: ${r.message}`)).toEqual([]);
    expect(run.status).toBe(0);
  });
});
