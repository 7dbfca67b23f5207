#!/usr/bin/env node
// `node scripts/check-packages.mjs`: what npm users get, checked as they get it. Builds every publishable package,
// packs it the way `pnpm publish` does (workspace:* becomes the version), and then
//   - lints each tarball with publint (strict: warnings and suggestions count) and @arethetypeswrong/core (types for
//     node10, node16 CJS and ESM, and bundlers);
//   - installs all the tarballs into one fresh app with plain npm, beside the OpenTelemetry SDK 2.x and the OTLP/HTTP
//     exporter (no ERESOLVE, one @opentelemetry/api), typechecks it with `skipLibCheck: false` under nodenext (an ESM
//     and a CommonJS file, and the `/metrics` and OTLP blocks of docs/observability.md) and bundler resolution, runs a
//     create-and-poll exchange over loopback from ESM and from CommonJS (core + Express adapter + client; CommonJS
//     with `--no-experimental-require-module`, as Node before 20.19 behaves), and runs the OTLP recipe of
//     docs/observability.md against a loopback collector (one trace: create -> run -> provider call);
//   - installs core with the oldest @opentelemetry/api its peer range admits (1.3.0) and the SDK 2.x into a second
//     app, typechecks it and runs one traced generation (create -> run -> provider call, tracestate kept).
// Prints one line per check and ends with `packages: N passed, M failed` (scripts/test.mjs adds it to its count).
// Options: --no-build (use the dist/ already built), --keep (leave the temp dir and print it).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = new Set(process.argv.slice(2));
const env = { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' };
const results = [];
const record = (name, ok, detail = '') => {
  results.push({ name, ok });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}`);
  if (!ok && detail) console.log(detail.trimEnd().replace(/^/gm, '     '));
};

/** Runs a command without blocking the event loop (the checks of several tarballs overlap). */
function run(cmd, argv, cwd, extraEnv = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, { cwd, env: { ...env, ...extraEnv } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (status) => resolve({ status, out }));
  });
}

const started = Date.now();
const work = mkdtempSync(join(tmpdir(), 'gs-packages-'));
const finish = () => {
  const failed = results.filter((r) => !r.ok).length;
  console.log(`check-packages: ${Math.round((Date.now() - started) / 1000)} s${args.has('--keep') ? `, kept ${work}` : ''}`);
  if (!args.has('--keep')) rmSync(work, { recursive: true, force: true });
  console.log(`packages: ${results.length - failed} passed, ${failed} failed`);
  process.exit(failed === 0 && results.length > 0 ? 0 : 1);
};

try {
  const pkgs = readdirSync(join(root, 'packages'))
    .map((dir) => ({ dir, json: JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8')) }))
    .filter((p) => !p.json.private);

  if (!args.has('--no-build')) {
    const build = spawnSync('npx', ['-y', 'pnpm@10', '-r', '--filter', './packages/**', 'run', 'build'], { cwd: root, env, encoding: 'utf8' });
    record('build every package', build.status === 0, build.stdout + build.stderr);
    if (build.status !== 0) finish();
  }

  // pnpm pack, as pnpm publish does: workspace:* ranges become the packages' versions in the tarball.
  const tarballs = join(work, 'tarballs');
  mkdirSync(tarballs);
  const pack = spawnSync('npx', ['-y', 'pnpm@10', '-r', '--filter', './packages/**', 'pack', '--pack-destination', tarballs], { cwd: root, env, encoding: 'utf8' });
  const tarballOf = (p) => join(tarballs, `${p.json.name.replace('@', '').replace('/', '-')}-${p.json.version}.tgz`);
  record('pack every package', pack.status === 0 && pkgs.every((p) => existsSync(tarballOf(p))), pack.stdout + pack.stderr);
  if (pack.status !== 0) finish();

  for (const p of pkgs) {
    const data = readFileSync(tarballOf(p));
    const problems = [];
    const manifest = JSON.parse(spawnSync('tar', ['-xzOf', tarballOf(p), 'package/package.json'], { encoding: 'utf8' }).stdout);
    for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
      for (const [name, range] of Object.entries(manifest[field] ?? {})) {
        if (String(range).startsWith('workspace:')) problems.push(`${field}.${name} is ${range} in the tarball`);
      }
    }
    for (const field of ['repository', 'engines', 'license']) if (!manifest[field]) problems.push(`no ${field}`);
    if (manifest.publishConfig?.access !== 'public') problems.push('publishConfig.access is not public');
    const lint = await publint({ pack: { tarball: data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) }, strict: true, level: 'suggestion' });
    for (const m of lint.messages) problems.push(`publint ${m.type}: ${formatMessage(m, lint.pkg) ?? m.code}`);
    const attw = await checkPackage(createPackageFromTarballData(new Uint8Array(data)));
    if (attw.types === false) problems.push('attw: no types');
    else for (const problem of attw.problems) problems.push(`attw ${problem.kind}: ${JSON.stringify({ ...problem, kind: undefined })}`);
    const files = spawnSync('tar', ['-tzf', tarballOf(p)], { encoding: 'utf8' }).stdout.split('\n');
    if (!files.includes('package/README.md')) problems.push('no README.md in the tarball');
    record(`${p.json.name}: tarball, publint, attw`, problems.length === 0, problems.join('\n'));
  }

  // One fresh app, one install: every tarball, plain npm, the registry for everything else. --ignore-scripts: the
  // app never opens SQLite, so better-sqlite3 need not compile (its types are what is checked).
  const app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'fresh-app', private: true, type: 'module' }, null, 2));
  // content-disposition@1: only because this one app has both Express and Koa. Express 5 hoists content-disposition 2,
  // whose own types lack the `Options` that @types/koa reads; an app with one of the two frameworks never meets it.
  // The OpenTelemetry packages of the OTLP recipe in docs/observability.md, as a reader installs them beside core.
  const otel = ['@opentelemetry/sdk-trace-node@2', '@opentelemetry/sdk-trace-base@2', '@opentelemetry/resources@2', '@opentelemetry/exporter-trace-otlp-http@0.203'];
  const installArgs = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=warn', ...pkgs.map(tarballOf), 'express@5', 'fastify@5', 'koa@3', 'content-disposition@1', '@ai-sdk/provider@3', 'vitest@4', '@types/node@20', ...otel];
  const install = await run('npm', installArgs, app);
  // A peer conflict npm resolved by overriding is only a warning (`npm warn ERESOLVE overriding peer dependency`).
  record('fresh app: npm install of every tarball and the OpenTelemetry SDK 2.x + OTLP exporter, no ERESOLVE', install.status === 0 && !install.out.includes('ERESOLVE'), install.out);
  if (install.status !== 0) finish();
  // One copy of the API, or the SDK registers with one and genservice reads another (its spans then never record).
  const apis = await run('npm', ['ls', '@opentelemetry/api', '--all', '--parseable'], app);
  const apiCopies = new Set(apis.out.split('\n').filter((l) => l.includes('@opentelemetry/api')));
  const apiTree = await run('npm', ['ls', '@opentelemetry/api', '--all'], app);
  record('fresh app: one @opentelemetry/api (npm ls)', apis.status === 0 && apiTree.status === 0 && apiCopies.size === 1, `${[...apiCopies].join('\n')}\n${apiTree.out}`);

  for (const [name, text] of Object.entries(freshAppFiles())) writeFileSync(join(app, name), text);
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const [nodenext, bundler] = await Promise.all([run(process.execPath, [tsc, '-p', 'tsconfig.json'], app), run(process.execPath, [tsc, '-p', 'tsconfig.bundler.json'], app)]);
  record('fresh app: tsc --strict, skipLibCheck false, nodenext (ESM and CommonJS)', nodenext.status === 0, nodenext.out);
  record('fresh app: tsc --strict, skipLibCheck false, bundler', bundler.status === 0, bundler.out);
  if (nodenext.status === 0) {
    // CommonJS as Node before 20.19 runs it (no require of an ES module): the ESM-only dependencies must be bundled.
    const [esm, cjs] = await Promise.all([
      run(process.execPath, ['out/exchange.js'], app),
      run(process.execPath, ['--no-experimental-require-module', 'out/exchange-cjs.cjs'], app),
    ]);
    record('fresh app: create-and-poll from ESM', esm.status === 0 && esm.out.includes('completed echo: esm'), esm.out);
    record('fresh app: create-and-poll from CommonJS, without require(esm)', cjs.status === 0 && cjs.out.includes('completed echo: cjs'), cjs.out);
    const otlp = await otlpRecipe(app);
    record('fresh app: the OTLP recipe of docs/observability.md exports one trace create -> run -> provider to a loopback collector', otlp.ok, otlp.detail);
  }
  const core = pkgs.find((p) => p.json.name === '@genservice/core');
  await oldestApi(core, tarballOf(core));
} catch (error) {
  record('check-packages ran', false, String(error?.stack ?? error));
}
finish();

/**
 * Runs the app's `out/server.js` (the recipe's server.ts, compiled) with `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` at a
 * collector on loopback (node:http, OTLP/HTTP JSON POSTs to /v1/traces), creates a generation with a client's
 * `traceparent`, waits for it, stops the host with SIGTERM (the recipe then exports what is buffered) and checks the
 * trace: genservice.create (a child of the client's span) -> genservice.run -> genservice.provider.generate.
 */
async function otlpRecipe(app) {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const clientSpan = '00f067aa0ba902b7';
  const spans = [];
  const refused = [];
  const collector = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        refused.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
        return void res.writeHead(415).end();
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = probe.address().port;
  await new Promise((resolve) => probe.close(resolve));
  const host = spawn(process.execPath, ['out/server.js'], {
    cwd: app,
    env: { ...env, PORT: String(port), ALICE_KEY: 'alice-otlp-key', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${collector.address().port}/v1/traces` },
  });
  let out = '';
  host.stdout.on('data', (d) => (out += d));
  host.stderr.on('data', (d) => (out += d));
  const exited = new Promise((resolve) => host.once('exit', resolve));
  const problems = [];
  try {
    await Promise.race([new Promise((resolve) => host.stdout.on('data', () => out.includes('listening') && resolve())), exited]);
    if (!out.includes('listening')) throw new Error('the host did not start');
    const base = `http://127.0.0.1:${port}/gen/v1`;
    const auth = { authorization: 'Bearer alice-otlp-key' };
    const created = await fetch(`${base}/generations`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', traceparent: `00-${traceId}-${clientSpan}-01` },
      body: JSON.stringify({ modelId: 'echo', settings: { prompt: 'otlp' } }),
    });
    const { generationId } = await created.json();
    let status = '';
    for (let i = 0; i < 200 && status !== 'completed'; i++) {
      status = (await (await fetch(`${base}/generations/${generationId}`, { headers: auth })).json()).status;
      if (status !== 'completed') await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (status !== 'completed') problems.push(`generation ${generationId} is ${status}`);
    host.kill('SIGTERM');
    const code = await exited;
    if (code !== 0) problems.push(`the host exited with ${code}`);
  } catch (error) {
    problems.push(String(error?.stack ?? error));
    host.kill('SIGKILL');
  } finally {
    collector.close();
  }
  const named = (name) => spans.filter((s) => s.name === name && s.traceId === traceId);
  const [create, run, call] = ['genservice.create', 'genservice.run', 'genservice.provider.generate'].map(named);
  if (refused.length > 0) problems.push(`collector refused: ${refused.join(', ')}`);
  if (create?.length !== 1 || run?.length !== 1 || call?.length !== 1) problems.push(`not one each of create, run, provider call in trace ${traceId}`);
  else {
    if (create[0].parentSpanId !== clientSpan) problems.push(`create's parent is ${create[0].parentSpanId}`);
    if (run[0].parentSpanId !== create[0].spanId) problems.push(`run's parent is ${run[0].parentSpanId}, not the create`);
    if (call[0].parentSpanId !== run[0].spanId) problems.push(`provider call's parent is ${call[0].parentSpanId}, not the run`);
  }
  const detail = `${problems.join('\n')}\nspans: ${spans.map((s) => `${s.name} ${s.traceId}/${s.spanId}<-${s.parentSpanId ?? ''}`).join('; ')}\nhost: ${out}`;
  return { ok: problems.length === 0, detail };
}

/**
 * Core's peer range for @opentelemetry/api is the widest its code works with: this app holds it to the lower end
 * (1.3.0, beside sdk-trace-base 2.x, which accepts it), typechecks a traced host with skipLibCheck off and runs it.
 */
async function oldestApi(core, tarball) {
  const min = core.json.peerDependencies['@opentelemetry/api'].replace(/^\^/, '');
  const dir = join(work, 'oldest-api');
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'oldest-api', private: true, type: 'module' }));
  const install = await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=warn', tarball, `@opentelemetry/api@${min}`, '@opentelemetry/sdk-trace-base@2', '@types/node@20'], dir);
  const copies = await run('npm', ['ls', '@opentelemetry/api', '--all'], dir);
  const versions = new Set(copies.out.match(/@opentelemetry\/api@[\d.]+/g) ?? []);
  record(`oldest api app: core beside @opentelemetry/api@${min} and sdk-trace-base 2.x, one copy`, install.status === 0 && !install.out.includes('ERESOLVE') && versions.size === 1 && versions.has(`@opentelemetry/api@${min}`), install.out + copies.out);
  if (install.status !== 0) return;
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, skipLibCheck: false, module: 'nodenext', moduleResolution: 'nodenext', target: 'ES2022', outDir: 'out', types: ['node'] }, include: ['traced.ts'] }));
  writeFileSync(
    join(dir, 'traced.ts'),
    `import { createGenerationService, MemoryApiKeyStore, MemoryLedger, traceHeaders, type ModelProvider } from '@genservice/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

const exporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const sent: Array<Record<string, string>> = [];
const provider: ModelProvider = {
  models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
  generate: async () => {
    await new Promise((resolve) => setImmediate(resolve));
    sent.push(traceHeaders());
    return { text: 'ok' };
  },
};
const service = createGenerationService({
  providers: [provider],
  apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
  ledger: new MemoryLedger({ balances: { u: 10 } }),
  telemetry: { tracerProvider },
});
await service.start();
const created = await service.handle({
  method: 'POST',
  path: '/v1/generations',
  headers: { authorization: 'Bearer k', 'content-type': 'application/json', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'a=1' },
  body: JSON.stringify({ modelId: 'echo' }),
});
const { generationId } = JSON.parse(String(created.body)) as { generationId: string };
while ((await service.get('u', generationId)).status !== 'completed') await new Promise((resolve) => setTimeout(resolve, 10));
await service.stop();
const spans = exporter.getFinishedSpans();
const one = (name: string) => spans.filter((s) => s.name === name);
const [create, run, call] = ['genservice.create', 'genservice.run', 'genservice.provider.generate'].map(one);
const ok =
  create?.length === 1 && run?.length === 1 && call?.length === 1 &&
  create[0]!.parentSpanContext?.spanId === '00f067aa0ba902b7' &&
  run[0]!.parentSpanContext?.spanId === create[0]!.spanContext().spanId &&
  call[0]!.parentSpanContext?.spanId === run[0]!.spanContext().spanId &&
  [create[0]!, run[0]!, call[0]!].every((s) => s.spanContext().traceId === '4bf92f3577b34da6a3ce929d0e0e4736' && s.spanContext().traceState?.serialize() === 'a=1') &&
  sent[0]?.traceparent === '00-4bf92f3577b34da6a3ce929d0e0e4736-' + call[0]!.spanContext().spanId + '-01' && sent[0]?.tracestate === 'a=1';
console.log(ok ? 'one trace' : 'wrong trace', JSON.stringify(spans.map((s) => [s.name, s.spanContext().spanId, s.parentSpanContext?.spanId])), JSON.stringify(sent));
`,
  );
  const tsc = await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], dir);
  record(`oldest api app: tsc --strict, skipLibCheck false, with @opentelemetry/api@${min}`, tsc.status === 0, tsc.out);
  if (tsc.status !== 0) return;
  const traced = await run(process.execPath, ['out/traced.js'], dir);
  record(`oldest api app: one trace create -> run -> provider call (telemetry.tracerProvider, tracestate kept) on @opentelemetry/api@${min}`, traced.status === 0 && traced.out.startsWith('one trace'), traced.out);
}

/** The ```ts blocks of a doc, by their first line (`// name.ts`) or by a string they contain. */
function docBlock(doc, pick) {
  const text = readFileSync(join(root, 'docs', doc), 'utf8');
  const found = [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]).filter((code) => (pick.endsWith('.ts') ? code.startsWith(`// ${pick}\n`) : code.includes(pick)));
  if (found.length !== 1) throw new Error(`docs/${doc}: ${found.length} blocks match ${pick}, not one`);
  return found[0];
}

function freshAppFiles() {
  const compilerOptions = { strict: true, skipLibCheck: false, noEmit: false, outDir: 'out', target: 'ES2022', types: ['node'] };
  // Every package's public entry, so that each one's declarations are checked with skipLibCheck off.
  const everything = `
import { createGenerationService, InvalidOptionsError, MemoryApiKeyStore, MemoryLedger, DiskBlobStore, createJsonLogger, type ModelProvider } from '@genservice/core';
import type { GenerationStore, Ledger } from '@genservice/core/ports';
import type { HttpRequest } from '@genservice/core/adapter';
import { genserviceRouter } from '@genservice/express';
import { genservicePlugin, genserviceFrameworkErrors } from '@genservice/fastify';
import { genserviceMiddleware, onBodyParserError } from '@genservice/koa';
import { createClient, GenServiceError } from '@genservice/client';
import { createSqliteStores } from '@genservice/store-sqlite';
import { createPostgresStores } from '@genservice/store-postgres';
import { BullMQQueue, RedisNotifier } from '@genservice/queue-bullmq';
import { PgBossQueue } from '@genservice/queue-pgboss';
import { createDemoProvider } from '@genservice/demo-models';
import { createReplicateProvider, createFalProvider } from '@genservice/providers';
import { createAiSdkProvider } from '@genservice/ai-sdk';
import { runPortContracts } from '@genservice/testing';
import { readPlaygroundAsset } from '@genservice/playground';
import { createMcpHandler } from '@genservice/mcp';

export const used: unknown[] = [
  createGenerationService, InvalidOptionsError, MemoryApiKeyStore, MemoryLedger, DiskBlobStore, createJsonLogger,
  genserviceRouter, genservicePlugin, genserviceFrameworkErrors, genserviceMiddleware, onBodyParserError,
  createClient, GenServiceError, createSqliteStores, createPostgresStores, BullMQQueue, RedisNotifier, PgBossQueue,
  createDemoProvider, createReplicateProvider, createFalProvider, createAiSdkProvider, runPortContracts, readPlaygroundAsset,
  createMcpHandler,
];
export type Types = [ModelProvider, GenerationStore, Ledger, HttpRequest];
`;
  const exchange = (flavour) => `
const provider: ModelProvider = {
  models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 0.1, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }], price: 1 }],
  generate: async (input) => ({ text: 'echo: ' + String(input.settings.prompt) }),
};
async function main(): Promise<void> {
  const service = createGenerationService({
    providers: [provider],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'key', userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 10 } }),
    trustRequestHost: true,
  });
  await service.start();
  const app = express();
  app.use('/gen', genserviceRouter(service));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  const client = createClient({ baseUrl: 'http://127.0.0.1:' + port + '/gen', apiKey: 'key' });
  const done = await client.generations.run({ modelId: 'echo', settings: { prompt: '${flavour}' } }, { timeoutMs: 10_000 });
  console.log(done.status, done.status === 'completed' ? done.result : '');
  server.close();
  await service.stop();
}
main().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;
  // The reader's own provider, which the doc blocks import (as examples/doc-blocks supplies it).
  const myProvider = `import type { ModelProvider } from '@genservice/core';
export const myProvider: ModelProvider = {
  models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 0.1, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }], price: 1 }],
  generate: async (input) => ({ text: 'echo: ' + String(input.settings.prompt) }),
};
`;
  return {
    // docs/observability.md as a reader copies it: the /metrics page, and the OTLP recipe (run by otlpRecipe).
    'my-provider.ts': myProvider,
    'metrics-page.ts': docBlock('observability.md', 'createPrometheusMetrics()'),
    'tracing.ts': docBlock('observability.md', 'tracing.ts'),
    'server.ts': docBlock('observability.md', 'server.ts'),
    'tsconfig.json': JSON.stringify({ compilerOptions: { ...compilerOptions, module: 'nodenext', moduleResolution: 'nodenext' }, include: ['*.ts', '*.cts'] }),
    'tsconfig.bundler.json': JSON.stringify({ compilerOptions: { ...compilerOptions, noEmit: true, module: 'esnext', moduleResolution: 'bundler' }, include: ['everything.ts', 'exchange.ts'] }),
    'everything.ts': everything,
    'everything-cjs.cts': everything.replace('export type Types', 'export type TypesCjs').replace('export const used', 'export const usedCjs'),
    'exchange.ts': `import type { AddressInfo } from 'node:net';
import express from 'express';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type ModelProvider } from '@genservice/core';
import { genserviceRouter } from '@genservice/express';
import { createClient } from '@genservice/client';
${exchange('esm')}`,
    'exchange-cjs.cts': `import type { AddressInfo } from 'node:net';
import express = require('express');
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type ModelProvider } from '@genservice/core';
import { genserviceRouter } from '@genservice/express';
import { createClient } from '@genservice/client';
${exchange('cjs')}`,
  };
}
