#!/usr/bin/env node
// Runs every test project once and ends with the plain count line CI reads:
//   tests: N passed, M failed
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = `${root}.vitest-results.json`;
const unhandledOut = `${root}.vitest-unhandled.json`;

// Lint first (Biome: no import cycles, adapters only on core's public entries). A failed lint counts as one failed test.
const lint = spawnSync('npx', ['biome', 'lint'], { cwd: root, stdio: 'inherit', env: { ...process.env, FORCE_COLOR: '0' } });
const lintFailed = lint.status === 0 ? 0 : 1;
if (lintFailed) console.log('lint: failed');

// The packages as npm users get them (build, pack, publint, attw, one fresh app installed with npm, typechecked with
// skipLibCheck off and run): each of its checks counts as a test. Only on a whole run: `node scripts/test.mjs
// --project core` is a developer's quick loop.
let packagesPassed = 0;
let packagesFailed = 0;
if (process.argv.length <= 2) {
  const pk = spawnSync(process.execPath, ['scripts/check-packages.mjs'], { cwd: root, encoding: 'utf8', env: { ...process.env, FORCE_COLOR: '0' } });
  process.stdout.write(pk.stdout + pk.stderr);
  const m = /^packages: (\d+) passed, (\d+) failed$/m.exec(pk.stdout);
  packagesPassed = m ? Number(m[1]) : 0;
  packagesFailed = m ? Number(m[2]) : 1;
  if (pk.status !== 0 && packagesFailed === 0) packagesFailed = 1;
}

rmSync(out, { force: true });
rmSync(unhandledOut, { force: true });
const args = [
  'vitest',
  'run',
  '--reporter=default',
  '--reporter=json',
  '--reporter=./scripts/unhandled-reporter.mjs',
  `--outputFile.json=${out}`,
  ...process.argv.slice(2),
];
const run = spawnSync('npx', args, { cwd: root, stdio: 'inherit', env: { ...process.env, FORCE_COLOR: '0', GENSERVICE_UNHANDLED_OUT: unhandledOut } });

let passed = 0;
let failed = 0;
if (existsSync(out)) {
  const r = JSON.parse(readFileSync(out, 'utf8'));
  passed = r.numPassedTests ?? 0;
  failed = r.numFailedTests ?? 0;
  // A file that failed without a failed test (it did not load, or a beforeAll/afterAll hook threw) counts once.
  const brokenFiles = (r.testResults ?? []).filter(
    (f) => f.status === 'failed' && !(f.assertionResults ?? []).some((a) => a.status === 'failed'),
  ).length;
  failed += brokenFiles;
} else {
  failed = 1;
}
if (run.status !== 0 && failed === 0) failed = 1;
// Errors outside any test fail the run too: name them here, next to the count, where a CI log's tail shows them.
if (existsSync(unhandledOut)) {
  for (const e of JSON.parse(readFileSync(unhandledOut, 'utf8'))) {
    console.log(`unhandled error: ${e.name}: ${e.message}${e.file ? ` (in ${e.file}${e.test ? ` > ${e.test}` : ''})` : ''}`);
    if (e.stack) console.log(`  at: ${e.stack}`);
  }
}
failed += lintFailed;
passed += packagesPassed;
failed += packagesFailed;
console.log(`tests: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
