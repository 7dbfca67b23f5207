#!/usr/bin/env node
// `pnpm bench [-- --only http|runner|stores|scale] [--quick] [--write] [--no-profile]`: starts bench/run.ts with
// the flags it needs (workspace packages from source through tsx, gc exposed for the memory figures, a heap large
// enough for a million in-memory generations) and passes its exit code on. Every child it starts dies with it.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bench = path.join(root, 'bench');
const args = process.argv.slice(2).filter((a) => a !== '--');
// Measure the packages as users install them: built by tsup (the ones the bench uses). `--source` runs the TypeScript sources instead.
const source = args.includes('--source');
if (!source && !args.includes('--report')) {
  const build = spawnSync('npx', ['-y', 'pnpm@10', '--filter', '@genservice-bench/bench^...', 'run', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}
const child = spawn(
  process.execPath,
  ['--expose-gc', '--max-old-space-size=8192', ...(source ? ['--conditions=@genservice/source'] : []), '--import', 'tsx', 'run.ts', ...args.filter((a) => a !== '--source')],
  { cwd: bench, stdio: 'inherit', env: { ...process.env, NODE_ENV: 'production', GENSERVICE_BENCH_SOURCE: source ? '1' : '0' } },
);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => child.kill(sig));
}
child.on('exit', (code, signal) => {
  process.exit(code ?? (signal ? 1 : 0));
});
