#!/usr/bin/env node
// `pnpm bench [-- --only http|runner|stores|scale] [--quick] [--write] [--no-profile]`: starts bench/run.ts with
// the flags it needs (workspace packages from source through tsx, gc exposed for the memory figures, a heap large
// enough for a million in-memory generations) and passes its exit code on. Every child it starts dies with it.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bench = path.join(root, 'bench');
const args = process.argv.slice(2).filter((a) => a !== '--');
const child = spawn(
  process.execPath,
  ['--expose-gc', '--max-old-space-size=8192', '--conditions=@genservice/source', '--import', 'tsx', 'run.ts', ...args],
  { cwd: bench, stdio: 'inherit', env: { ...process.env, NODE_ENV: 'production' } },
);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => child.kill(sig));
}
child.on('exit', (code, signal) => {
  process.exit(code ?? (signal ? 1 : 0));
});
