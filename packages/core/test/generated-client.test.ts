// A client generated from the served OpenAPI document (openapi-typescript + openapi-fetch, what many users reach for)
// must narrow a poll on `status` with no type errors, and run a create-and-poll exchange against the service.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, ProviderError, type ModelDefinition } from '@genservice/core';

// Inside the package, so the snippet resolves openapi-fetch from the package's own node_modules.
const dir = mkdtempSync(join(fileURLToPath(new URL('..', import.meta.url)), '.generated-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const models: ModelDefinition[] = [
  {
    modelId: 'txt',
    title: 'Text',
    resultType: 'text',
    estimatedGenerationTime: 1,
    settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
    price: 2,
    failureFee: 1,
  },
];

const service = createGenerationService({
  providers: [
    {
      models,
      generate: async (input) => {
        if (input.settings.prompt === 'fail') throw new ProviderError('no', { retryable: false, publicMessage: 'The model refused.' });
        return { text: `echo: ${String(input.settings.prompt)}` };
      },
    },
  ],
  apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
  ledger: new MemoryLedger({ balances: { u: 100 } }),
  publicUrl: 'http://gen.test',
});

beforeAll(() => service.start());
afterAll(() => service.stop());

/** What a user writes with the generated client: every line below must typecheck under --strict. */
const SNIPPET = `
import createClient from 'openapi-fetch';
import type { paths } from './api';

export async function exchange(fetch: (r: Request) => Promise<Response>, prompt: string): Promise<string[]> {
  const client = createClient<paths>({ baseUrl: 'http://gen.test', headers: { authorization: 'Bearer k' }, fetch });
  const seen: string[] = [];
  const created = await client.POST('/v1/generations', { body: { modelId: 'txt', settings: { prompt } } });
  if (!created.data) throw new Error('create failed');
  const id: string = created.data.generationId;
  for (;;) {
    // A long-poll: the answer comes when the status changes (or after 5 s), so the loop needs no sleep.
    const { data: g, error } = await client.GET('/v1/generations/{id}', { params: { path: { id }, header: { Prefer: 'wait=5' } } });
    if (error) throw new Error(error.error.message);
    if (g.status === 'completed') {
      const result: string = g.result;
      const price: number = g.price;
      seen.push(\`completed \${result} \${price}\`);
      break;
    }
    if (g.status === 'failed') {
      const price: number = g.price;
      // @ts-expect-error a failed generation has no result
      g.result;
      seen.push(\`failed \${price}\`);
      break;
    }
    // @ts-expect-error pending and processing carry no price
    g.price;
  }
  const { data: d } = await client.GET('/v1/generations/{id}/details', { params: { path: { id } } });
  if (d?.status === 'completed') {
    const result: string = d.result;
    const createdAt: string = d.createdAt;
    seen.push(\`details completed \${result} \${createdAt.length > 0}\`);
  }
  if (d?.status === 'failed') {
    const why: string | undefined = d.error?.message;
    seen.push(\`details failed \${why}\`);
  }
  const bad = await client.POST('/v1/generations', { body: { modelId: 'txt', settings: {} as { prompt: string } } });
  for (const detail of bad.error?.error.details ?? []) {
    const code: 'required' | 'unknown_setting' | 'invalid_type' | 'invalid_option' | 'invalid_value' | 'invalid_url' | 'too_many' | 'too_long' | 'too_many_errors' = detail.code;
    seen.push(\`detail \${code}\`);
  }
  return seen;
}
`;

/** openapi-fetch's fetch, answered by the service itself (the HTTP path under test is the document, not a socket). */
async function viaService(request: Request): Promise<Response> {
  const url = new URL(request.url);
  const body = request.method === 'GET' ? undefined : await request.text();
  const headers: Record<string, string> = {};
  request.headers.forEach((value, key) => {
    headers[key] = value;
  });
  const res = await service.handle({ method: request.method, path: url.pathname + url.search, headers, body });
  return new Response(res.body as string, { status: res.status, headers: res.headers });
}

describe('a client generated with openapi-typescript', () => {
  it('narrows a poll and the details view on status with no type errors, and runs a create-and-poll exchange', async () => {
    const doc = await service.handle({ method: 'GET', path: '/v1/openapi.json', headers: {} });
    const ast = await openapiTS(JSON.parse(String(doc.body)));
    writeFileSync(join(dir, 'api.ts'), astToString(ast));
    writeFileSync(join(dir, 'snippet.ts'), SNIPPET);

    const program = ts.createProgram([join(dir, 'snippet.ts')], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      skipLibCheck: false,
      types: [],
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .map((d) => `${d.file ? `${d.file.fileName.slice(dir.length)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1} ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    expect(problems).toEqual([]);

    const { exchange } = (await import(pathToFileURL(join(dir, 'snippet.ts')).href)) as {
      exchange(fetch: (r: Request) => Promise<Response>, prompt: string): Promise<string[]>;
    };
    expect(await exchange(viaService, 'hi')).toEqual(['completed echo: hi 2', 'details completed echo: hi true', 'detail required']);
    expect(await exchange(viaService, 'fail')).toEqual(['failed 1', 'details failed The model refused.', 'detail required']);
  }, 180_000); // It runs openapi-typescript and the TypeScript compiler: minutes on a busy machine.
});
