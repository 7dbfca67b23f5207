// Every ```ts block of README.md and docs/*.md, as a reader copies it: each one is written out as a file of its own
// and the whole lot typechecked twice, as an ESM app and as a CommonJS app (--strict, skipLibCheck: false, module
// NodeNext); the getting-started chain is also run, against a host started on loopback.
//
// The conventions a doc follows (so that a block stays what a reader can paste):
// - A block is a complete module: everything it uses is imported or declared in it. There is no hidden setup.
// - It may import the reader's own code, visibly: `./my-provider.js` (`myProvider`, a ModelProvider),
//   `./my-model.js` (`myModel`, the model a provider calls) and `./my-stores.js` (`createMyStores`, the reader's
//   own store package: docs/writing-a-store.md). This test supplies those three.
// - A block whose first line is `// name.ts` is written under that name, so a later block of the same doc can import
//   it (`import { service } from './service.js'`).
// - A block that only makes sense after another one says so in its first line, `// continues name.ts above`: it is
//   checked joined to that block (the named block's text, then its own), as a reader pasting it below would have it.
// - As ESM every block compiles without an error. As CommonJS the only errors allowed are those of top-level await
//   (a CommonJS reader wraps the block in an async function): every other line must be valid there too.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import express from 'express';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import type { GenerationService } from '@genservice/core';
import { optionsSchema } from '../../../packages/core/src/options-schema.js';
import { genserviceRouter } from '@genservice/express';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const here = fileURLToPath(new URL('..', import.meta.url));
const out = join(here, '.generated');
rmSync(out, { recursive: true, force: true });
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The reader's own code the blocks may import (named in the block itself). */
const CONTEXT: Record<string, string> = {
  'my-provider.ts': `import type { ModelProvider } from '@genservice/core';
/** The reader's own provider (see docs/writing-a-provider.md). */
export const myProvider: ModelProvider = {
  models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 1, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }], price: 1 }],
  generate: async (input) => ({ text: 'echo: ' + String(input.settings.prompt) }),
};
`,
  'my-model.ts': `/** The reader's own model: whatever a provider calls. */
export const myModel = {
  async complete(prompt: string, options: { signal: AbortSignal; onProgress?: (fraction: number) => void }): Promise<string> {
    options.onProgress?.(0.5);
    if (options.signal.aborted) throw new Error('aborted');
    return 'a haiku about ' + prompt;
  },
};
`,
  'my-stores.ts': `import { MemoryApiKeyStore, MemoryGenerationStore, MemoryIdempotencyStore, MemoryLedger } from '@genservice/core';
import type { ApiKeyStore, GenerationStore, IdempotencyStore, Ledger } from '@genservice/core/ports';
/** The reader's own store package (see docs/writing-a-store.md): here core's in-memory ports stand in for it. */
export async function createMyStores(_options: { url: string | undefined; fresh: boolean }): Promise<{
  store: GenerationStore; ledger: Ledger; apiKeys: ApiKeyStore; idempotency: IdempotencyStore; close(): Promise<void>;
}> {
  return { store: new MemoryGenerationStore(), ledger: new MemoryLedger(), apiKeys: new MemoryApiKeyStore(), idempotency: new MemoryIdempotencyStore(), close: async () => {} };
}
`,
};

interface Block {
  doc: string;
  /** Line of the opening fence in the doc. */
  line: number;
  /** File name inside the doc's directory. */
  name: string;
  /** What is written: the block, or the block it continues followed by it. */
  text: string;
}

type Flavour = 'esm' | 'cjs';

/**
 * The diagnostic of top-level await (and of a top-level `for await`) in a CommonJS file under module NodeNext:
 * TS1309, "The current file is a CommonJS module and cannot use 'await' at the top level".
 */
const TOP_LEVEL_AWAIT = new Set([1309]);

// docs/architecture.md is the contributors' page: its blocks are excerpts of core's own source (the route table),
// which core's own tests compile and run where they stand; a reader of the library never pastes them.
const docs = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md') && f !== 'architecture.md').map((f) => `docs/${f}`)];

function extract(): Block[] {
  const blocks: Block[] = [];
  for (const doc of docs) {
    const text = readFileSync(join(root, doc), 'utf8');
    const named = new Map<string, string>();
    const fence = /^```ts\n([\s\S]*?)^```/gm;
    for (let m = fence.exec(text); m; m = fence.exec(text)) {
      const line = text.slice(0, m.index).split('\n').length;
      const code = m[1]!;
      const first = code.split('\n', 1)[0]!;
      const continues = /^\/\/ continues ([\w-]+\.ts) above\b/.exec(first);
      const name = /^\/\/ ([\w-]+\.ts)\b/.exec(first);
      let body = code;
      if (continues) {
        const before = named.get(continues[1]!);
        if (before === undefined) throw new Error(`${doc}:${line} continues ${continues[1]}, which no block above it is named`);
        body = `${before}${code}`;
      }
      if (name) {
        if (named.has(name[1]!)) throw new Error(`${doc}:${line}: a second block named ${name[1]}`);
        named.set(name[1]!, code);
      }
      blocks.push({ doc, line, name: name ? name[1]! : `block-${line}.ts`, text: body });
    }
  }
  return blocks;
}

function dirOf(flavour: Flavour, doc: string): string {
  return join(out, flavour, doc.replace(/[/.]/g, '_'));
}

/** Writes every block as a file of a `type: module` (esm) or `type: commonjs` (cjs) app. */
function write(flavour: Flavour, blocks: Block[]): Map<string, Block> {
  mkdirSync(join(out, flavour), { recursive: true });
  writeFileSync(join(out, flavour, 'package.json'), JSON.stringify({ type: flavour === 'esm' ? 'module' : 'commonjs' }));
  const files = new Map<string, Block>();
  for (const doc of docs) {
    mkdirSync(dirOf(flavour, doc), { recursive: true });
    for (const [name, code] of Object.entries(CONTEXT)) writeFileSync(join(dirOf(flavour, doc), name), code);
  }
  for (const block of blocks) {
    const file = join(dirOf(flavour, block.doc), block.name);
    writeFileSync(file, block.text);
    files.set(file, block);
  }
  return files;
}

/** Typechecks the blocks as a reader's app would (skipLibCheck off); the problems by block, `doc:line`. */
function check(files: Map<string, Block>): Map<string, { code: number; text: string }[]> {
  const program = ts.createProgram([...files.keys()], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    // The workspace packages from source (the packed ones are checked the same way by scripts/check-packages.mjs).
    customConditions: ['@genservice/source'],
    esModuleInterop: true,
    skipLibCheck: false,
    // Each block is a file of its own: no block's top-level names meet another's.
    moduleDetection: ts.ModuleDetectionKind.Force,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    typeRoots: [join(root, 'node_modules/@types')],
  });
  const problems = new Map<string, { code: number; text: string }[]>();
  const workspaceSources = join(root, 'packages');
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const fileName = d.file?.fileName;
    // The packages' own sources are checked by the repository's tsc under their own options.
    if (fileName?.startsWith(workspaceSources)) continue;
    const block = fileName ? files.get(fileName) : undefined;
    const where = block ? `${block.doc}:${block.line}` : (fileName ?? '(options)');
    const at = d.file ? `line ${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: ` : '';
    const list = problems.get(where) ?? [];
    list.push({ code: d.code, text: `${at}TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}` });
    problems.set(where, list);
  }
  return problems;
}

describe('the code blocks of README.md and docs/*.md', () => {
  const blocks = extract();
  const files = { esm: write('esm', blocks), cjs: write('cjs', blocks) };

  it('hide no setup: no doc has a hidden prelude comment', () => {
    const hidden = docs.filter((doc) => readFileSync(join(root, doc), 'utf8').includes('<!-- prelude'));
    expect(hidden).toEqual([]);
    expect(blocks.length).toBeGreaterThan(30);
  });

  it('compile as copied into an ESM app, each as a file of its own (continuations joined to what they continue)', () => {
    const problems = check(files.esm);
    const report = [...problems].map(([where, list]) => `${where}: ${list.map((p) => p.text).join(' | ')}`);
    expect(report, `${problems.size} of ${blocks.length} blocks do not compile as ESM`).toEqual([]);
  }, 240_000);

  it('compile as copied into a CommonJS app, where top-level await is the only error allowed', () => {
    const problems = check(files.cjs);
    const report = [...problems]
      .map(([where, list]) => [where, list.filter((p) => !TOP_LEVEL_AWAIT.has(p.code))] as const)
      .filter(([, list]) => list.length > 0)
      .map(([where, list]) => `${where}: ${list.map((p) => p.text).join(' | ')}`);
    expect(report, `${report.length} of ${blocks.length} blocks have errors other than top-level await as CommonJS (${problems.size} have some error)`).toEqual([]);
  }, 240_000);

  it('getting-started runs as written: its provider, its SQLite service with ALICE_KEY, mounted, and its client', async () => {
    const dir = dirOf('esm', 'docs/getting-started.md');
    const cwd = mkdtempSync(join(tmpdir(), 'gs-getting-started-'));
    const before = process.cwd();
    process.env.ALICE_KEY = 'alice-key-from-the-environment';
    process.chdir(cwd);
    let service: GenerationService | undefined;
    let close: (() => Promise<void>) | undefined;
    const server = express();
    try {
      // service.ts is section 3 (imports provider.ts, section 2): it opens ./data/genservice.db in the cwd.
      const setup = (await import(pathToFileURL(join(dir, 'service.ts')).href)) as { service: GenerationService; stores: { close(): Promise<void> } };
      service = setup.service;
      close = () => setup.stores.close();
      server.use('/gen', genserviceRouter(service));
      const listening = server.listen(0, '127.0.0.1');
      await new Promise((resolve) => listening.once('listening', resolve));
      try {
        process.env.GENSERVICE_URL = `http://127.0.0.1:${(listening.address() as AddressInfo).port}/gen`;
        process.env.GENSERVICE_API_KEY = process.env.ALICE_KEY;
        const { done } = (await import(pathToFileURL(join(dir, 'client.ts')).href)) as { done: { status: string; result?: string; price?: number } };
        expect(done).toEqual({ generationId: expect.any(String), status: 'completed', result: 'a haiku about autumn', price: 1 });
      } finally {
        listening.close();
      }
    } finally {
      await service?.stop();
      await close?.();
      process.chdir(before);
      rmSync(cwd, { recursive: true, force: true });
    }
  }, 60_000);
});

/** Unwraps optional/nullable wrappers down to the schema that has a shape, if any. */
function shapeOf(schema: unknown): Record<string, unknown> | undefined {
  let s = schema as { def?: { type?: string; innerType?: unknown; shape?: Record<string, unknown> } } | undefined;
  for (let i = 0; i < 5 && s?.def; i++) {
    if (s.def.type === 'object') return s.def.shape;
    s = s.def.innerType as typeof s;
  }
  return undefined;
}

describe('the options of createGenerationService', () => {
  it('are each documented: every top-level option in the README table, every nested one in README.md or docs/*.md', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const docs = [readme, ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => readFileSync(join(root, 'docs', f), 'utf8'))].join('\n');
    const hostKeys = new Set(['db', 'close']); // spread in from a store package's result, not options of ours
    const missing: string[] = [];
    for (const [key, schema] of Object.entries(optionsSchema.shape)) {
      if (hostKeys.has(key)) continue;
      if (!new RegExp(`^\\| \`${key}[\`.]`, 'm').test(readme)) missing.push(key);
      for (const inner of Object.keys(shapeOf(schema) ?? {})) {
        const rows = readme.split('\n').filter((l) => l.startsWith(`| \`${key}`));
        const inRow = rows.some((l) => new RegExp(`\\b${inner}\\b`).test(l));
        if (!inRow && !docs.includes(`\`${inner}\``) && !docs.includes(`${key}.${inner}`)) missing.push(`${key}.${inner}`);
      }
    }
    expect(missing).toEqual([]);
  });
});


describe('the README', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');

  it('lists every environment variable the example hosts read', () => {
    const dir = join(root, 'examples/host-kit/src');
    const names = new Set<string>();
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const src = readFileSync(join(dir, file), 'utf8');
      // `env.NAME` / `process.env.NAME`, and the keys of the zod schema the host parses the environment with.
      for (const m of src.matchAll(/\benv\.([A-Z][A-Z0-9_]+)/g)) names.add(m[1]!);
      const schema = /const envSchema = z\.object\(\{([\s\S]*?)\n\}\);/.exec(src);
      if (schema) for (const m of schema[1]!.matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)) names.add(m[1]!);
    }
    expect(names.size).toBeGreaterThan(25);
    expect([...names].filter((name) => !readme.includes(`\`${name}\``))).toEqual([]);
  });

  it('lists every package in its packages table', () => {
    const rows = readme.split('\n').filter((l) => l.startsWith('| `@genservice/'));
    const names = readdirSync(join(root, 'packages'))
      .map((dir) => JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8')) as { name: string; private?: boolean })
      .filter((p) => !p.private)
      .map((p) => p.name);
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((name) => !rows.some((row) => row.split('|')[1]!.includes(`\`${name}\``)))).toEqual([]);
  });
});
