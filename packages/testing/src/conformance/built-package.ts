import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export interface BuiltPackageOptions {
  /** Absolute path of the package folder (e.g. `packages/express`). */
  packageDir: string;
  /** Its npm name (e.g. `@genservice/express`). */
  name: string;
}

export interface BuiltPackageExports {
  /** Export names seen by `require(name)` from a CommonJS host. */
  cjs: string[];
  /** Export names seen by `import(name)` from an ES module host. */
  esm: string[];
}

const LOCK = join(tmpdir(), 'genservice-build.lock');

/**
 * Builds `@genservice/core` (when its dist is older than its sources) and the package with their own `build`
 * scripts, then loads the built package from a fresh folder outside the workspace, once with `require` and once
 * with `import`, each in a child Node process. Builds run one at a time across processes, since every adapter's
 * test rebuilds the same core dist.
 */
export function loadBuiltPackage(options: BuiltPackageOptions): BuiltPackageExports {
  const root = resolve(options.packageDir, '..', '..');
  const coreDir = join(root, 'packages', 'core');
  withLock(() => {
    if (isStale(coreDir)) run('npm', ['run', '--silent', 'build'], coreDir);
    run('npm', ['run', '--silent', 'build'], options.packageDir);
  });

  const host = mkdtempSync(join(tmpdir(), 'genservice-host-'));
  try {
    const link = join(host, 'node_modules', ...options.name.split('/'));
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(options.packageDir, link, 'dir');
    const spec = JSON.stringify(options.name);
    const cjs = run('node', ['-e', `console.log(JSON.stringify(Object.keys(require(${spec}))))`], host);
    const esm = run('node', ['--input-type=module', '-e', `const m = await import(${spec}); console.log(JSON.stringify(Object.keys(m)))`], host);
    return { cjs: lastJsonLine(cjs), esm: lastJsonLine(esm) };
  } finally {
    rmSync(host, { recursive: true, force: true });
  }
}

function run(command: string, args: string[], cwd: string): string {
  try {
    return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 180_000 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

function lastJsonLine(output: string): string[] {
  const line = output.trim().split('\n').at(-1) ?? '[]';
  return JSON.parse(line) as string[];
}

/** The core dist is missing or older than a source file. */
function isStale(packageDir: string): boolean {
  let built: number;
  try {
    built = Math.min(statSync(join(packageDir, 'dist', 'index.cjs')).mtimeMs, statSync(join(packageDir, 'dist', 'index.js')).mtimeMs);
  } catch {
    return true;
  }
  const newest = (dir: string): number =>
    readdirSync(dir, { withFileTypes: true }).reduce((max, e) => {
      const p = join(dir, e.name);
      return Math.max(max, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
    }, 0);
  return Math.max(newest(join(packageDir, 'src')), statSync(join(packageDir, 'package.json')).mtimeMs) > built;
}

function withLock(work: () => void): void {
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      // A lock left by a killed run must not block every later one.
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > 240_000) rmSync(LOCK, { recursive: true, force: true });
      } catch {
        // It was just released.
      }
      if (Date.now() > deadline) throw new Error(`could not take the build lock ${LOCK}`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    work();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}
