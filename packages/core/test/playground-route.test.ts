import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createGenerationService } from '@genservice/core';

// The page itself (its files, hostile paths, the page in Chromium) is tested in packages/playground.

const provider = {
  models: [{ modelId: 'm', title: 'M', resultType: 'text' as const, estimatedGenerationTime: 1, settings: [], price: 1 }],
  generate: async () => ({ text: 'ok' }),
};

describe('the playground route', () => {
  it('is a JSON 404 unless the service is created with playground: true', async () => {
    const service = createGenerationService({ providers: [provider] });
    for (const path of ['/playground', '/playground/', '/playground/app.js']) {
      const r = await service.handle({ method: 'GET', path, headers: {} });
      expect(r.status, path).toBe(404);
      expect(JSON.parse(String(r.body)).error.code).toBe('not_found');
    }
  });

  it('answers a JSON 404, never a 500, and logs why, when the installed playground package is broken', () => {
    // A child process whose module resolution swaps @genservice/playground for a module without
    // readPlaygroundAsset (a Node resolve hook: the import in core is a real dynamic import of the installed package).
    const dir = fileURLToPath(new URL('./.generated/', import.meta.url));
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}broken-playground.mjs`, 'export const nothing = 1;\n');
    writeFileSync(
      `${dir}playground-hook.mjs`,
      `export async function resolve(s, c, next) {
        return s === '@genservice/playground' ? { url: new URL('./broken-playground.mjs', import.meta.url).href, shortCircuit: true } : next(s, c);
      }\n`,
    );
    writeFileSync(`${dir}playground-register.mjs`, "import { register } from 'node:module';\nregister('./playground-hook.mjs', import.meta.url);\n");
    writeFileSync(
      `${dir}playground-broken.ts`,
      `import { createGenerationService } from '@genservice/core';
      const lines: string[] = [];
      const logger = { debug() {}, info() {}, warn() {}, error(_o: unknown, m: string) { lines.push(m); }, child() { return logger; } };
      const service = createGenerationService({ logger, playground: true, providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }], generate: async () => ({ text: 'ok' }) }] });
      const r = await service.handle({ method: 'GET', path: '/playground/', headers: {} });
      console.log(JSON.stringify({ status: r.status, body: JSON.parse(String(r.body)), lines }));\n`,
    );
    const out = execFileSync(
      process.execPath,
      ['--conditions=@genservice/source', '--import', `${dir}playground-register.mjs`, '--import', 'tsx', `${dir}playground-broken.ts`],
      { cwd: fileURLToPath(new URL('..', import.meta.url)), encoding: 'utf8' },
    );
    const result = JSON.parse(out.trim().split('\n').pop()!);
    expect(result.status).toBe(404);
    expect(result.body.error.code).toBe('not_found');
    expect(result.lines.join(' ')).toMatch(/has no readPlaygroundAsset/);
  });

  it('rejects a non-boolean playground option', () => {
    expect(() => createGenerationService({ providers: [provider], playground: 'yes' as never })).toThrow(/playground/);
  });
});
