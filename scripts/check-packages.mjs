#!/usr/bin/env node
// `node scripts/check-packages.mjs`: what npm users get, checked as they get it. Builds every publishable package,
// packs it the way `pnpm publish` does (workspace:* becomes the version), and then
//   - lints each tarball with publint (strict: warnings and suggestions count) and @arethetypeswrong/core (types for
//     node10, node16 CJS and ESM, and bundlers);
//   - installs all the tarballs into one fresh app with plain npm, typechecks it with `skipLibCheck: false` under
//     nodenext (an ESM and a CommonJS file) and bundler resolution, and runs a create-and-poll exchange over loopback
//     from ESM and from CommonJS (core + Express adapter + client).
// Prints one line per check and ends with `packages: N passed, M failed` (scripts/test.mjs adds it to its count).
// Options: --no-build (use the dist/ already built), --keep (leave the temp dir and print it).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
  const installArgs = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error', ...pkgs.map(tarballOf), 'express@5', 'fastify@5', 'koa@3', 'content-disposition@1', '@ai-sdk/provider@3', 'vitest@4', '@types/node@20'];
  const install = await run('npm', installArgs, app);
  record('fresh app: npm install of every tarball', install.status === 0, install.out);
  if (install.status !== 0) finish();

  for (const [name, text] of Object.entries(freshAppFiles())) writeFileSync(join(app, name), text);
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const [nodenext, bundler] = await Promise.all([run(process.execPath, [tsc, '-p', 'tsconfig.json'], app), run(process.execPath, [tsc, '-p', 'tsconfig.bundler.json'], app)]);
  record('fresh app: tsc --strict, skipLibCheck false, nodenext (ESM and CommonJS)', nodenext.status === 0, nodenext.out);
  record('fresh app: tsc --strict, skipLibCheck false, bundler', bundler.status === 0, bundler.out);
  if (nodenext.status === 0) {
    const [esm, cjs] = await Promise.all([run(process.execPath, ['out/exchange.js'], app), run(process.execPath, ['out/exchange-cjs.cjs'], app)]);
    record('fresh app: create-and-poll from ESM', esm.status === 0 && esm.out.includes('completed echo: esm'), esm.out);
    record('fresh app: create-and-poll from CommonJS', cjs.status === 0 && cjs.out.includes('completed echo: cjs'), cjs.out);
  }
} catch (error) {
  record('check-packages ran', false, String(error?.stack ?? error));
}
finish();

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

export const used: unknown[] = [
  createGenerationService, InvalidOptionsError, MemoryApiKeyStore, MemoryLedger, DiskBlobStore, createJsonLogger,
  genserviceRouter, genservicePlugin, genserviceFrameworkErrors, genserviceMiddleware, onBodyParserError,
  createClient, GenServiceError, createSqliteStores, createPostgresStores, BullMQQueue, RedisNotifier, PgBossQueue,
  createDemoProvider, createReplicateProvider, createFalProvider, createAiSdkProvider, runPortContracts, readPlaygroundAsset,
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
  return {
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
