#!/usr/bin/env node
// `pnpm check:packages`: builds every publishable package and checks what npm would ship with publint and
// @arethetypeswrong/cli (types for both `import` and `require`). Prints one line per package and exits 1 on a problem.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (cmd, args, cwd) => spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, FORCE_COLOR: '0' } });

const build = spawnSync('npx', ['-y', 'pnpm@10', '-r', '--filter', './packages/**', 'run', 'build'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) process.exit(1);

let bad = 0;
for (const dir of readdirSync(`${root}packages`)) {
  const cwd = `${root}packages/${dir}`;
  const pkg = JSON.parse(readFileSync(`${cwd}/package.json`, 'utf8'));
  if (pkg.private) continue;
  const publint = run('npx', ['publint', '--strict', '--pack', 'npm'], cwd);
  const attw = run('npx', ['attw', '--pack', '.', '--format', 'ascii'], cwd);
  const ok = publint.status === 0 && attw.status === 0;
  if (!ok) bad++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${pkg.name}`);
  if (!ok) console.log(publint.stdout + publint.stderr + attw.stdout + attw.stderr);
}
process.exit(bad === 0 ? 0 : 1);
