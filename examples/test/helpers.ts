import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const examplesDir = fileURLToPath(new URL('..', import.meta.url));

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface RunningHost {
  url: string;
  api: string;
  proc: ChildProcess;
  output: () => string;
  /** SIGTERM, and resolves with the exit code. */
  stop(): Promise<number | null>;
  kill(): Promise<void>;
}

export interface TempData {
  dir: string;
  usersFile: string;
  cleanup(): void;
}

export function tempData(users: Array<{ id: string; apiKey: string; balance: number }>): TempData {
  const dir = mkdtempSync(join(tmpdir(), 'genservice-host-'));
  const usersFile = join(dir, 'users.json');
  writeFileSync(usersFile, JSON.stringify({ users }));
  return { dir, usersFile, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Starts `examples/<kind>-host` the way `pnpm start` does, and waits for its `listening on` line. */
export async function startHost(kind: 'express' | 'fastify' | 'koa', env: Record<string, string>, timeoutMs = 30_000): Promise<RunningHost> {
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const proc = spawn(process.execPath, ['--conditions=@genservice/source', '--import', 'tsx', 'src/server.ts'], {
    cwd: join(examplesDir, `${kind}-host`),
    env: { ...process.env, HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${kind}-host did not start:\n${out}`)), timeoutMs);
    const check = (): void => {
      if (/listening on /.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${kind}-host exited with ${String(code)}:\n${out}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    api: `${url}/api`,
    proc,
    output: () => out,
    stop: async () => {
      proc.kill('SIGTERM');
      return exited;
    },
    kill: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
  };
}
