import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** A fresh directory under the OS temp dir; `remove()` deletes it with everything in it. */
export async function tempDir(): Promise<{ dir: string; file: (name?: string) => string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'genservice-sqlite-'));
  return {
    dir,
    file: (name = 'genservice.db') => join(dir, name),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

const running = new Set<ChildProcess>();

/** Kills fixtures a failed or timed-out test left running, so none outlives the test run. */
export function killFixtures(): void {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  running.clear();
}

/** Starts `test/fixtures/<script>` in a plain Node process (TypeScript through tsx), as a second host would run. */
export function spawnFixture(script: string, args: string[]): ChildProcess {
  const path = fileURLToPath(new URL(`./fixtures/${script}`, import.meta.url));
  const child = spawn(process.execPath, ['--conditions=@genservice/source', '--import', tsxLoader, path, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/** Resolves with the first stdout line that parses as JSON (a fixture's report). */
export function nextJsonLine<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    let stderr = '';
    const onData = (chunk: Buffer): void => {
      buffer += chunk.toString('utf8');
      let newline: number;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line.startsWith('{')) {
          child.stdout!.off('data', onData);
          resolve(JSON.parse(line) as T);
          return;
        }
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('exit', (code, signal) =>
      reject(new Error(`fixture exited (code ${code}, signal ${signal}) before reporting:\n${stderr}`)),
    );
  });
}

export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}
